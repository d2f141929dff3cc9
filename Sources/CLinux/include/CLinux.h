// Linux system calls that Glibc's Swift module does not export.
#ifndef CLINUX_H
#define CLINUX_H
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/types.h>

/// accept4(2), declared by glibc only under _GNU_SOURCE.
int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/// Keeps up to `bytes` of freed memory at the top of the heap instead of returning it
/// to the kernel (mallopt M_TRIM_THRESHOLD).
static inline void clinux_keep_freed_memory(int bytes) {
    mallopt(M_TRIM_THRESHOLD, bytes);
    /* Buffers up to 2 MiB (request bodies, list pages) come from the heap and are reused,
       not mapped and unmapped (and faulted in) one by one. */
    mallopt(M_MMAP_THRESHOLD, 2 << 20);
}

/// Returns the freed memory malloc holds, in every arena, to the kernel (malloc_trim): the
/// top of each heap past what malloc must keep, and the whole pages inside its free chunks.
static inline void clinux_return_freed_memory(void) { malloc_trim(0); }

/// Tells the kernel that the process no longer needs the pages it has faulted in of the
/// read-only segments of the program and its libraries (their code and read-only data):
/// madvise(MADV_DONTNEED) on the pages wholly inside every loadable segment without write permission (never
/// writable, so the file holds exactly what is mapped: not the RELRO part of the writable
/// segment, whose pointers the loader relocated) of every loaded object but the vDSO and
/// objects with text relocations. The pages stay in the page cache; those used again come
/// back at their first use, by a minor fault. Segments stay mapped as long as their object
/// is loaded: nothing another thread does can put other memory in their place. Returns
/// the kilobytes of the segments advised (their size, resident or not), and sets the
/// process's resident kilobytes before and after (/proc/self/statm, read with read(2) so
/// that measuring touches no code serving does not: -1 when it cannot be read).
long clinux_release_read_only_segments(long *resident_before, long *resident_after);

/// posix_spawn(3) of `path` with `argv` and `envp` (NULL-terminated), its standard input,
/// output and error from `input`, `output` and `error` (-1: the caller's own), and no other
/// descriptor of the caller (posix_spawn_file_actions_addclosefrom_np, which Glibc's Swift
/// module does not export). Returns 0 or an error number; sets `*pid`.
int clinux_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int input, int output, int error);

/// Lowers the calling thread's CPU priority to `niceness` (Linux keeps a nice value per
/// thread): background work yields the CPU to requests. 0 on success.
int clinux_lower_thread_priority(int niceness);

/// Runs `path` with `argv` and `envp` (NULL-terminated) in a process group of its own, its
/// standard input /dev/null and its output and error `output` and `error`, no other
/// descriptor of the caller, no signal blocked, and limits: `cpu_seconds` of CPU
/// (RLIMIT_CPU: SIGXCPU, then SIGKILL), `memory_bytes` of address space (RLIMIT_AS),
/// `file_bytes` per file it writes (RLIMIT_FSIZE), no core file, and `niceness` (0: as the
/// caller). A limit of 0 is none. The child dies with the thread that started it
/// (PR_SET_PDEATHSIG), so a server killed outright leaves none running. fork and exec,
/// since posix_spawn sets no limits.
/// Returns 0 or an error number; sets `*pid`.
int clinux_spawn_limited(
    pid_t *pid, const char *path, char *const argv[], char *const envp[], int output, int error, long cpu_seconds, long memory_bytes,
    long file_bytes, int niceness);

/// Frees the disk blocks of `length` bytes of `fd` from `offset` (a hole; the file keeps
/// its size): fallocate(2) with FALLOC_FL_PUNCH_HOLE. 0, or -1 with errno.
int clinux_punch_hole(int fd, long long offset, long long length);

/// Starts writing `length` bytes of `fd` from `offset` back to disk without waiting
/// (sync_file_range with SYNC_FILE_RANGE_WRITE), so a later fdatasync has less to wait for.
int clinux_start_writeback(int fd, long long offset, long long length);

/// Work budgets for SQLite statements, per thread: `clinux_budget_start` starts one of
/// `allowance_ns` (unless one is already running; returns whether it started one),
/// `clinux_budget_end` ends it, and `clinux_budget_exceeded` (installed with
/// sqlite3_progress_handler) answers non-zero, interrupting the statement, once the calling
/// thread has spent more than the allowance of CPU time since the start, or ten times it
/// of wall-clock time.
int clinux_budget_start(uint64_t allowance_ns);
void clinux_budget_end(void);
int clinux_budget_exceeded(void *unused);
/// The allowance a thread's reads get (0 until set: the caller's default applies).
uint64_t clinux_budget_allowance(void);
void clinux_budget_set_allowance(uint64_t allowance_ns);

/// The parts of a SQLite wal-index header (the first copy, at the start of `<db>-shm`,
/// https://sqlite.org/walformat.html) that every commit changes: its change counter,
/// its last valid frame and its two salts, read with atomic loads from a mapping of it.
/// A commit by any connection of any process writes them before its readers may see it.
static inline void clinux_wal_index_signature(const void *header, uint32_t out[4]) {
    const uint32_t *words = (const uint32_t *)header;
    out[0] = __atomic_load_n(&words[2], __ATOMIC_ACQUIRE);  /* iChange */
    out[1] = __atomic_load_n(&words[4], __ATOMIC_ACQUIRE);  /* mxFrame */
    out[2] = __atomic_load_n(&words[8], __ATOMIC_ACQUIRE);  /* aSalt[0] */
    out[3] = __atomic_load_n(&words[9], __ATOMIC_ACQUIRE);  /* aSalt[1] */
}
#endif
