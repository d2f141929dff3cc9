// A VFS over the system's default one that gathers each transaction's WAL writes. SQLite
// writes every WAL frame with two `pwrite`s, its 24-byte header and its page, so a commit
// of 36 frames made 72 system calls, each with the kernel's own entry, inode lock and
// time update. Here they are copied into a buffer and written with one call per 124 KiB
// (two for that commit), the last when the commit frame is complete.
//
// What SQLite sees does not change:
// - Writes reach the file in the order they were made; a write that does not continue
//   the buffer first writes the buffer out.
// - Everything that looks at the file through this handle (a read, its size, a sync, a
//   truncation, a file control, a mapping, closing it) first writes the buffer out.
// - A commit is complete in the file, or failed with its error, before the write of its
//   last frame returns: the frame whose header carries the database size (bytes 4–7,
//   nonzero for commit frames only, https://www.sqlite.org/fileformat.html#wal_file_format)
//   is written out with its page. SQLite publishes a commit to other connections only
//   after that write (and, with synchronous=FULL, the sync after it) succeeds, so no
//   reader, in this process or another, is ever told of a frame not yet in the file.
// - A crash loses at most frames of a transaction that had not committed: the same as
//   a crash a moment earlier.
// Files other than WALs are opened by the default VFS unchanged.

#include "csqlite.h"
#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

/// The buffer: the most the unix VFS writes with one call (its `seekAndWrite` takes 17
/// bits of length), 30 frames of 4 KiB pages. A larger transaction (a batch of 16
/// creates writes about 36 frames) writes its frames out each time it fills.
#define WAL_BUFFER_CAPACITY (124 * 1024)
#define WAL_FRAME_HEADER_SIZE 24

typedef struct WalFile {
    sqlite3_file base;
    /// The default VFS's file, stored just after this struct.
    sqlite3_file *real;
    unsigned char *buffer;
    int used;
    /// Where in the file `buffer[0]` goes.
    sqlite3_int64 start;
    /// The last write was a commit frame's header: the next one, its page, ends the commit.
    int commitPageNext;
} WalFile;

static sqlite3_vfs *defaultVFS;

static int walFlush(WalFile *file) {
    if (file->used == 0) return SQLITE_OK;
    int used = file->used;
    file->used = 0;
    return file->real->pMethods->xWrite(file->real, file->buffer, used, file->start);
}

static int walClose(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    int closed = file->real->pMethods->xClose(file->real);
    sqlite3_free(file->buffer);
    file->buffer = NULL;
    return rc != SQLITE_OK ? rc : closed;
}

static int walRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xRead(file->real, data, amount, offset);
}

static int walWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    WalFile *file = (WalFile *)f;
    const unsigned char *bytes = data;
    int commitHeader = amount == WAL_FRAME_HEADER_SIZE && (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
    int endsCommit = file->commitPageNext;
    file->commitPageNext = commitHeader;
    int rc = SQLITE_OK;
    if (file->used > 0 && (offset != file->start + file->used || file->used + amount > WAL_BUFFER_CAPACITY)) {
        rc = walFlush(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (file->buffer == NULL && amount <= WAL_BUFFER_CAPACITY) {
        file->buffer = sqlite3_malloc(WAL_BUFFER_CAPACITY);
    }
    if (file->buffer == NULL || amount > WAL_BUFFER_CAPACITY) {
        // Out of memory or a write larger than the buffer: written as SQLite asked.
        return file->real->pMethods->xWrite(file->real, data, amount, offset);
    }
    if (file->used == 0) file->start = offset;
    memcpy(file->buffer + file->used, data, (size_t)amount);
    file->used += amount;
    return endsCommit ? walFlush(file) : SQLITE_OK;
}

static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xTruncate(file->real, size);
}

static int walSync(sqlite3_file *f, int flags) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xSync(file->real, flags);
}

static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xFileSize(file->real, size);
}

static int walLock(sqlite3_file *f, int lock) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xLock(file->real, lock);
}

static int walUnlock(sqlite3_file *f, int lock) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xUnlock(file->real, lock);
}

static int walCheckReservedLock(sqlite3_file *f, int *reserved) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xCheckReservedLock(file->real, reserved);
}

static int walFileControl(sqlite3_file *f, int op, void *argument) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xFileControl(file->real, op, argument);
}

static int walSectorSize(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xSectorSize(file->real);
}

static int walDeviceCharacteristics(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

static int walShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **memory) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xShmMap(file->real, region, size, extend, memory);
}

static int walShmLock(sqlite3_file *f, int offset, int n, int flags) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xShmLock(file->real, offset, n, flags);
}

static void walShmBarrier(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    file->real->pMethods->xShmBarrier(file->real);
}

static int walShmUnmap(sqlite3_file *f, int deleteFlag) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xShmUnmap(file->real, deleteFlag);
}

static int walFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **pointer) {
    WalFile *file = (WalFile *)f;
    int rc = walFlush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xFetch(file->real, offset, amount, pointer);
}

static int walUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *pointer) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xUnfetch(file->real, offset, pointer);
}

/// Version 3 methods, for a default file with version 3 methods; `walMethods2` and
/// `walMethods1` stop where an older default file's methods do.
static const sqlite3_io_methods walMethods3 = {
    3, walClose, walRead, walWrite, walTruncate, walSync, walFileSize, walLock, walUnlock,
    walCheckReservedLock, walFileControl, walSectorSize, walDeviceCharacteristics,
    walShmMap, walShmLock, walShmBarrier, walShmUnmap, walFetch, walUnfetch,
};
static const sqlite3_io_methods walMethods2 = {
    2, walClose, walRead, walWrite, walTruncate, walSync, walFileSize, walLock, walUnlock,
    walCheckReservedLock, walFileControl, walSectorSize, walDeviceCharacteristics,
    walShmMap, walShmLock, walShmBarrier, walShmUnmap, NULL, NULL,
};
static const sqlite3_io_methods walMethods1 = {
    1, walClose, walRead, walWrite, walTruncate, walSync, walFileSize, walLock, walUnlock,
    walCheckReservedLock, walFileControl, walSectorSize, walDeviceCharacteristics,
    NULL, NULL, NULL, NULL, NULL, NULL,
};

static int vfsOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    if ((flags & SQLITE_OPEN_WAL) == 0) {
        // The struct SQLite allocated is large enough for the default VFS's own file.
        return defaultVFS->xOpen(defaultVFS, name, f, flags, outFlags);
    }
    WalFile *file = (WalFile *)f;
    memset(file, 0, sizeof(WalFile));
    file->real = (sqlite3_file *)((char *)f + ((sizeof(WalFile) + 7) & ~(size_t)7));
    int rc = defaultVFS->xOpen(defaultVFS, name, file->real, flags, outFlags);
    const sqlite3_io_methods *real = file->real->pMethods;
    if (real != NULL) {
        file->base.pMethods = real->iVersion >= 3 ? &walMethods3 : real->iVersion == 2 ? &walMethods2 : &walMethods1;
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
    walVFS.szOsFile = (int)((sizeof(WalFile) + 7) & ~(size_t)7) + base->szOsFile;
    walVFS.mxPathname = base->mxPathname;
    defaultVFS = base;
    registered = sqlite3_vfs_register(&walVFS, 1);
}

int csqlite_register_wal_vfs(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, registerOnce);
    return registered;
}
