// A VFS over the system's default one that gathers each transaction's WAL writes. SQLite
// writes every WAL frame with two `pwrite`s, its 24-byte header and its page, so a commit
// of 36 frames made 72 system calls, each with the kernel's own entry, inode lock and
// time update. Here a WAL's appended frames are copied into a buffer and written with one
// call per 124 KiB (two for that commit), the last when the commit is complete.
//
// What SQLite and other connections see does not change:
// - Writes reach the file in the order they were made. Only appends are gathered: a write
//   over what this handle already wrote (SQLite rewriting frame checksums, or a frame
//   again after a savepoint rolled back) first writes the buffer out, then itself.
// - A commit is in the file, or has failed with its own error, before the write that
//   completes it returns. A commit frame's header carries the database size (bytes 4–7,
//   nonzero for commit frames only, https://www.sqlite.org/fileformat.html#wal_file_format);
//   the write of its page, and every write after it in the transaction (padding frames,
//   a split write, rewritten checksums), writes the buffer out. SQLite publishes a commit
//   only after those writes (and, with synchronous=FULL, the sync) succeed, so no reader,
//   in this process or another, is told of a frame not in the file.
// - Everything that looks at the file through this handle (a read, its size, a sync, a
//   truncation, a file control, a mapping) first writes the buffer out.
// - Frames still buffered when the connection gives up the WAL's write lock (or makes
//   any shared-memory lock call without holding it) belong to a transaction that rolled
//   back (a commit has written its own out), so they are dropped there, before another
//   writer may append over them; the same at close. To see that lock, main database
//   files are wrapped too (every method passed through), and each WAL is linked to its
//   database file (`sqlite3_database_file_object`). In exclusive locking mode there are
//   no such calls, and no other writer: leftovers are written, in order, before the
//   next frames.
// Files other than databases and WALs are opened by the default VFS unchanged.

#include "csqlite.h"
#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

/// The buffer: the most the unix VFS writes with one call (its `seekAndWrite` takes 17
/// bits of length), 30 frames of 4 KiB pages. A larger transaction (a batch of 16
/// creates writes about 36 frames) writes its frames out each time it fills.
#define WAL_BUFFER_CAPACITY (124 * 1024)
#define WAL_FRAME_HEADER_SIZE 24
#define WAL_HEADER_SIZE 32
/// SQLite's WAL write lock is the first lock of the shared memory (`WAL_WRITE_LOCK` in wal.c).
#define WAL_WRITE_LOCK 0

/// The fields every wrapped file starts with.
typedef struct WrappedFile {
    sqlite3_file base;
    /// The default VFS's file, stored just after the wrapper.
    sqlite3_file *real;
} WrappedFile;

typedef struct WalFile WalFile;

typedef struct DatabaseFile {
    WrappedFile wrapped;
    /// The WAL open on this database by the same connection, if any.
    WalFile *wal;
    /// Whether this connection holds the WAL's write lock.
    int writeLocked;
} DatabaseFile;

struct WalFile {
    WrappedFile wrapped;
    DatabaseFile *database;
    unsigned char *buffer;
    int used;
    /// Where in the file `buffer[0]` goes.
    sqlite3_int64 start;
    /// The end of what this handle has written (or buffered) in this transaction.
    sqlite3_int64 end;
    /// A commit frame's header has been written in this transaction: every write after
    /// it (its page, padding frames, rewritten checksums) completes the commit.
    int inCommit;
};

/// Room for either wrapper before the default VFS's own file.
#define WRAPPER_SIZE (((sizeof(WalFile) > sizeof(DatabaseFile) ? sizeof(WalFile) : sizeof(DatabaseFile)) + 7) & ~(size_t)7)

static sqlite3_vfs *defaultVFS;

#define REAL(f) (((WrappedFile *)(f))->real)

// MARK: Methods passed through

static int fwdRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) { return REAL(f)->pMethods->xRead(REAL(f), data, amount, offset); }
static int fwdWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) { return REAL(f)->pMethods->xWrite(REAL(f), data, amount, offset); }
static int fwdTruncate(sqlite3_file *f, sqlite3_int64 size) { return REAL(f)->pMethods->xTruncate(REAL(f), size); }
static int fwdSync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int fwdFileSize(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int fwdLock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xLock(REAL(f), lock); }
static int fwdUnlock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xUnlock(REAL(f), lock); }
static int fwdCheckReservedLock(sqlite3_file *f, int *reserved) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), reserved); }
static int fwdFileControl(sqlite3_file *f, int op, void *argument) { return REAL(f)->pMethods->xFileControl(REAL(f), op, argument); }
static int fwdSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int fwdDeviceCharacteristics(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int fwdShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **memory) { return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, memory); }
static int fwdShmLock(sqlite3_file *f, int offset, int n, int flags) { return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags); }
static void fwdShmBarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int fwdShmUnmap(sqlite3_file *f, int deleteFlag) { return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag); }
static int fwdFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **pointer) { return REAL(f)->pMethods->xFetch(REAL(f), offset, amount, pointer); }
static int fwdUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *pointer) { return REAL(f)->pMethods->xUnfetch(REAL(f), offset, pointer); }

// MARK: WAL files

static int walFlush(WalFile *file) {
    if (file->used == 0) return SQLITE_OK;
    int used = file->used;
    file->used = 0;
    return fwdWrite((sqlite3_file *)file, file->buffer, used, file->start);
}

/// Ends the transaction (or, after a flush, the WAL): forgets buffered frames (a
/// rolled-back transaction's; a commit has written its own out) and what was written.
static void walDrop(WalFile *file) {
    file->used = 0;
    file->end = 0;
    file->inCommit = 0;
}

static int walClose(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    walDrop(file);
    if (file->database != NULL) file->database->wal = NULL;
    int rc = REAL(f)->pMethods->xClose(REAL(f));
    sqlite3_free(file->buffer);
    file->buffer = NULL;
    return rc;
}

static int walRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    int rc = walFlush((WalFile *)f);
    return rc != SQLITE_OK ? rc : fwdRead(f, data, amount, offset);
}

static int walWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    WalFile *file = (WalFile *)f;
    const unsigned char *bytes = data;
    int rc = SQLITE_OK;
    if (amount == WAL_HEADER_SIZE && offset == 0) {
        // A new WAL (after a checkpoint rewound it): everything before is history.
        rc = walFlush(file);
        if (rc != SQLITE_OK) return rc;
        walDrop(file);
    }
    // Every write after a commit frame's header completes the commit. (A piece of a page
    // that looks like one only writes out sooner.)
    int completesCommit = file->inCommit;
    if (amount == WAL_FRAME_HEADER_SIZE && (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0) file->inCommit = 1;
    if (offset < file->end) {
        // Over what this handle wrote already: in order, and at once.
        rc = walFlush(file);
        return rc != SQLITE_OK ? rc : fwdWrite(f, data, amount, offset);
    }
    if (file->used > 0 && (offset != file->start + file->used || file->used + amount > WAL_BUFFER_CAPACITY)) {
        rc = walFlush(file);
        if (rc != SQLITE_OK) return rc;
    }
    file->end = offset + amount;
    if (file->buffer == NULL && amount <= WAL_BUFFER_CAPACITY) file->buffer = sqlite3_malloc(WAL_BUFFER_CAPACITY);
    if (file->buffer == NULL || amount > WAL_BUFFER_CAPACITY) {
        // Out of memory or a write larger than the buffer: written as SQLite asked.
        return fwdWrite(f, data, amount, offset);
    }
    if (file->used == 0) file->start = offset;
    memcpy(file->buffer + file->used, data, (size_t)amount);
    file->used += amount;
    return completesCommit ? walFlush(file) : SQLITE_OK;
}

static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    if (rc != SQLITE_OK) return rc;
    if (file->end > size) file->end = size;
    return fwdTruncate(f, size);
}

static int walSync(sqlite3_file *f, int flags) {
    int rc = walFlush((WalFile *)f);
    return rc != SQLITE_OK ? rc : fwdSync(f, flags);
}

static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    int rc = walFlush((WalFile *)f);
    return rc != SQLITE_OK ? rc : fwdFileSize(f, size);
}

static int walFileControl(sqlite3_file *f, int op, void *argument) {
    int rc = walFlush((WalFile *)f);
    return rc != SQLITE_OK ? rc : fwdFileControl(f, op, argument);
}

static int walFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **pointer) {
    int rc = walFlush((WalFile *)f);
    return rc != SQLITE_OK ? rc : fwdFetch(f, offset, amount, pointer);
}

/// All of a WAL's methods; `walMethods` holds them as versions 1, 2 and 3, for a default
/// file whose own methods stop at that version (``makeVersions``).
static const sqlite3_io_methods walMethodsFull = {
    3, walClose, walRead, walWrite, walTruncate, walSync, walFileSize, fwdLock, fwdUnlock, fwdCheckReservedLock,
    walFileControl, fwdSectorSize, fwdDeviceCharacteristics, fwdShmMap, fwdShmLock, fwdShmBarrier, fwdShmUnmap,
    walFetch, fwdUnfetch,
};
static sqlite3_io_methods walMethods[3];

// MARK: Database files

static int databaseClose(sqlite3_file *f) {
    DatabaseFile *file = (DatabaseFile *)f;
    if (file->wal != NULL) file->wal->database = NULL;
    file->wal = NULL;
    return REAL(f)->pMethods->xClose(REAL(f));
}

/// Outside a write transaction (the write lock not held, or being given up) the WAL's
/// buffer holds nothing worth keeping: it is dropped before the lock call goes on, so
/// before another writer may append.
static int databaseShmLock(sqlite3_file *f, int offset, int n, int flags) {
    DatabaseFile *file = (DatabaseFile *)f;
    int writeLock = offset <= WAL_WRITE_LOCK && WAL_WRITE_LOCK < offset + n && (flags & SQLITE_SHM_EXCLUSIVE) != 0;
    if (file->wal != NULL && (!file->writeLocked || (writeLock && (flags & SQLITE_SHM_UNLOCK) != 0))) walDrop(file->wal);
    int rc = fwdShmLock(f, offset, n, flags);
    if (writeLock && rc == SQLITE_OK) file->writeLocked = (flags & SQLITE_SHM_LOCK) != 0;
    return rc;
}

static const sqlite3_io_methods databaseMethodsFull = {
    3, databaseClose, fwdRead, fwdWrite, fwdTruncate, fwdSync, fwdFileSize, fwdLock, fwdUnlock, fwdCheckReservedLock,
    fwdFileControl, fwdSectorSize, fwdDeviceCharacteristics, fwdShmMap, databaseShmLock, fwdShmBarrier, fwdShmUnmap,
    fwdFetch, fwdUnfetch,
};
static sqlite3_io_methods databaseMethods[3];

/// `full` as versions 1, 2 and 3: version 2 adds shared memory, version 3 mappings.
static void makeVersions(const sqlite3_io_methods *full, sqlite3_io_methods versions[3]) {
    for (int version = 1; version <= 3; version++) {
        sqlite3_io_methods *methods = &versions[version - 1];
        *methods = *full;
        methods->iVersion = version;
        if (version < 3) {
            methods->xFetch = NULL;
            methods->xUnfetch = NULL;
        }
        if (version < 2) {
            methods->xShmMap = NULL;
            methods->xShmLock = NULL;
            methods->xShmBarrier = NULL;
            methods->xShmUnmap = NULL;
        }
    }
}

static int isDatabaseFile(const sqlite3_file *f) {
    if (f == NULL) return 0;
    for (int index = 0; index < 3; index++) {
        if (f->pMethods == &databaseMethods[index]) return 1;
    }
    return 0;
}

static int vfsOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    int wal = (flags & SQLITE_OPEN_WAL) != 0, database = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    if (!wal && !database) {
        // The struct SQLite allocated is large enough for the default VFS's own file.
        return defaultVFS->xOpen(defaultVFS, name, f, flags, outFlags);
    }
    memset(f, 0, WRAPPER_SIZE);
    WrappedFile *wrapped = (WrappedFile *)f;
    wrapped->real = (sqlite3_file *)((char *)f + WRAPPER_SIZE);
    int rc = defaultVFS->xOpen(defaultVFS, name, wrapped->real, flags, outFlags);
    const sqlite3_io_methods *real = wrapped->real->pMethods;
    if (real == NULL) return rc;
    int version = real->iVersion >= 3 ? 3 : real->iVersion < 1 ? 1 : real->iVersion;
    if (wal) {
        f->pMethods = &walMethods[version - 1];
        if (rc == SQLITE_OK && name != NULL) {
            // Valid for the names SQLite's pager passes (a VFS stacked above this one
            // must pass them on unchanged).
            sqlite3_file *owner = sqlite3_database_file_object(name);
            if (isDatabaseFile(owner)) {
                WalFile *file = (WalFile *)f;
                file->database = (DatabaseFile *)owner;
                file->database->wal = file;
            }
        }
    } else {
        f->pMethods = &databaseMethods[version - 1];
    }
    return rc;
}

static int vfsDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    return defaultVFS->xDelete(defaultVFS, name, syncDirectory);
}

static int vfsAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return defaultVFS->xAccess(defaultVFS, name, flags, result);
}

static int vfsFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return defaultVFS->xFullPathname(defaultVFS, name, size, out);
}

static void *vfsDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return defaultVFS->xDlOpen(defaultVFS, name);
}

static void vfsDlError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    defaultVFS->xDlError(defaultVFS, size, message);
}

static void (*vfsDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return defaultVFS->xDlSym(defaultVFS, library, symbol);
}

static void vfsDlClose(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    defaultVFS->xDlClose(defaultVFS, library);
}

static int vfsRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return defaultVFS->xRandomness(defaultVFS, size, out);
}

static int vfsSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return defaultVFS->xSleep(defaultVFS, microseconds);
}

static int vfsCurrentTime(sqlite3_vfs *vfs, double *now) {
    (void)vfs;
    return defaultVFS->xCurrentTime(defaultVFS, now);
}

static int vfsGetLastError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    return defaultVFS->xGetLastError(defaultVFS, size, message);
}

static int vfsCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    (void)vfs;
    return defaultVFS->xCurrentTimeInt64(defaultVFS, now);
}

static sqlite3_vfs walVFS = {
    2, 0, 0, NULL, "catalog-wal", NULL,
    vfsOpen, vfsDelete, vfsAccess, vfsFullPathname, vfsDlOpen, vfsDlError, vfsDlSym, vfsDlClose,
    vfsRandomness, vfsSleep, vfsCurrentTime, vfsGetLastError, vfsCurrentTimeInt64,
    NULL, NULL, NULL,
};

static int registered = SQLITE_ERROR;

static void registerOnce(void) {
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (base == NULL || base->iVersion < 2 || base->xCurrentTimeInt64 == NULL) return;
    makeVersions(&walMethodsFull, walMethods);
    makeVersions(&databaseMethodsFull, databaseMethods);
    walVFS.szOsFile = (int)WRAPPER_SIZE + base->szOsFile;
    walVFS.mxPathname = base->mxPathname;
    defaultVFS = base;
    registered = sqlite3_vfs_register(&walVFS, 1);
}

int csqlite_register_wal_vfs(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, registerOnce);
    return registered;
}
