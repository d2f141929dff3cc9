#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <link.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "CLinux.h"

int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    return accept4(fd, address, length, flags);
}

int clinux_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int input, int output, int error) {
    posix_spawn_file_actions_t actions;
    int result = posix_spawn_file_actions_init(&actions);
    if (result != 0) return result;
    int sources[3] = {input, output, error};
    for (int target = 0; target < 3 && result == 0; target++) {
        if (sources[target] >= 0) result = posix_spawn_file_actions_adddup2(&actions, sources[target], target);
    }
    if (result == 0) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    // The child starts with no signal blocked and every signal's default action, as a
    // fresh process: a parent's threads block signals they wait for (SIGTERM, SIGHUP, …),
    // and a blocked mask would outlive exec (a child that could not be terminated).
    posix_spawnattr_t attributes;
    if (result == 0) result = posix_spawnattr_init(&attributes);
    if (result == 0) {
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        result = posix_spawnattr_setsigmask(&attributes, &none);
        if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &all);
        if (result == 0) result = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        if (result == 0) result = posix_spawn(pid, path, &actions, &attributes, argv, envp);
        posix_spawnattr_destroy(&attributes);
    }
    posix_spawn_file_actions_destroy(&actions);
    return result;
}

int clinux_spawn_limited(
    pid_t *pid, const char *path, char *const argv[], char *const envp[], int output, int error, long cpu_seconds, long memory_bytes,
    long file_bytes, int niceness) {
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) return errno;
    if (child == 0) {
        // Only async-signal-safe calls from here to exec: the parent has other threads.
        setpgid(0, 0);
        // Killed with the server (a kill -9 of it leaves no ffmpeg running on).
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(126);
        // Every signal as a fresh process has it: the server ignores some (SIGPIPE, SIGHUP, …),
        // and an ignored signal stays ignored across exec.
        struct sigaction fresh;
        memset(&fresh, 0, sizeof(fresh));
        fresh.sa_handler = SIG_DFL;
        for (int number = 1; number < NSIG; number++) sigaction(number, &fresh, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct rlimit limit;
        if (cpu_seconds > 0) {
            limit.rlim_cur = (rlim_t)cpu_seconds;
            limit.rlim_max = (rlim_t)cpu_seconds + 5;
            setrlimit(RLIMIT_CPU, &limit);
        }
        if (memory_bytes > 0) {
            limit.rlim_cur = limit.rlim_max = (rlim_t)memory_bytes;
            setrlimit(RLIMIT_AS, &limit);
        }
        if (file_bytes > 0) {
            limit.rlim_cur = limit.rlim_max = (rlim_t)file_bytes;
            setrlimit(RLIMIT_FSIZE, &limit);
        }
        limit.rlim_cur = limit.rlim_max = 0;
        setrlimit(RLIMIT_CORE, &limit);
        if (niceness != 0) setpriority(PRIO_PROCESS, 0, niceness);
        int input = open("/dev/null", O_RDONLY);
        if (input < 0 || dup2(input, 0) < 0 || dup2(output, 1) < 0 || dup2(error, 2) < 0) _exit(126);
        if (syscall(SYS_close_range, 3, ~0U, 0) != 0) {
            // A kernel before 5.9: one by one, up to the descriptor limit.
            long last = sysconf(_SC_OPEN_MAX);
            for (long fd = 3; fd < (last > 0 ? last : 65536); fd++) close((int)fd);
        }
        execve(path, argv, envp);
        _exit(127);
    }
    // Here too, so the group exists before the caller may signal it (whichever runs first).
    setpgid(child, child);
    *pid = child;
    return 0;
}

int clinux_punch_hole(int fd, long long offset, long long length) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
}

int clinux_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (off64_t)offset, (off64_t)length, SYNC_FILE_RANGE_WRITE);
}

// A read's budget is the work its thread does: the CPU time it spends, so a machine that is
// loaded (other processes, other threads) stretches no read into a refusal. The wall clock
// is read at every check, for it costs no system call; the thread's CPU time (a system
// call) at the first check, a thousand steps in, and then only once the wall-clock
// allowance has passed. A read that has taken ten allowances of wall clock (blocked on the
// disk, or starved) is interrupted whatever its CPU time.
static _Thread_local uint64_t budget_started;      // monotonic, 0 while no budget runs
static _Thread_local uint64_t budget_running;      // the allowance of the running budget
static _Thread_local uint64_t budget_cpu_started;  // thread CPU time at the start, 0 until first asked
static _Thread_local uint64_t budget_allowance;

static uint64_t clock_ns(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

int clinux_budget_start(uint64_t allowance_ns) {
    if (budget_started != 0) return 0;
    budget_started = clock_ns(CLOCK_MONOTONIC);
    budget_running = allowance_ns;
    budget_cpu_started = 0;
    return 1;
}

void clinux_budget_end(void) { budget_started = 0; }

int clinux_budget_exceeded(void *unused) {
    (void)unused;
    if (budget_started == 0) return 0;
    uint64_t elapsed = clock_ns(CLOCK_MONOTONIC) - budget_started;
    if (budget_cpu_started == 0) {
        // The first check: the CPU time at the start is taken as if the thread had run
        // throughout (never less than it spent), so the start costs no system call.
        uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        budget_cpu_started = cpu > elapsed ? cpu - elapsed : 1;
    }
    if (elapsed <= budget_running) return 0;
    if (elapsed / 10 > budget_running) return 1;
    return clock_ns(CLOCK_THREAD_CPUTIME_ID) - budget_cpu_started > budget_running;
}

uint64_t clinux_budget_allowance(void) { return budget_allowance; }

void clinux_budget_set_allowance(uint64_t allowance_ns) { budget_allowance = allowance_ns; }

int clinux_lower_thread_priority(int niceness) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), niceness);
}

/* Adds to `*released` the bytes of every read-only segment of one loaded object. */
static int release_read_only_segments(struct dl_phdr_info *info, size_t size, void *released) {
    (void)size;
    /* The vDSO is the kernel's, not a file's. */
    if (info->dlpi_name != NULL && strncmp(info->dlpi_name, "linux-vdso", 10) == 0) return 0;
    /* An object whose code the loader relocated in place (text relocations) wrote to it. */
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_DYNAMIC) continue;
        for (const ElfW(Dyn) *entry = (const ElfW(Dyn) *)(info->dlpi_addr + header->p_vaddr); entry->d_tag != DT_NULL; entry++) {
            if (entry->d_tag == DT_TEXTREL || (entry->d_tag == DT_FLAGS && (entry->d_un.d_val & DF_TEXTREL))) return 0;
        }
    }
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        /* Never writable: mapped read-only by the loader and never made writable, unlike
           the RELRO part of the writable segment, which holds relocated pointers. */
        if (header->p_type != PT_LOAD || (header->p_flags & PF_W) != 0 || header->p_memsz == 0) continue;
        /* Only the pages wholly inside the segment: a page it shares with a neighbour (which
           standard linkers avoid, but ELF allows) may hold that neighbour's written data. */
        uintptr_t start = (info->dlpi_addr + header->p_vaddr + page - 1) & ~(page - 1);
        uintptr_t end = (info->dlpi_addr + header->p_vaddr + header->p_memsz) & ~(page - 1);
        if (end > start && madvise((void *)start, end - start, MADV_DONTNEED) == 0) *(size_t *)released += end - start;
    }
    return 0;
}

/* The process's resident memory in kilobytes (/proc/self/statm), or -1. */
static long resident_kilobytes(void) {
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char text[128];
    ssize_t count = read(fd, text, sizeof text - 1);
    close(fd);
    if (count <= 0) return -1;
    text[count] = 0;
    unsigned long size, resident;
    if (sscanf(text, "%lu %lu", &size, &resident) != 2) return -1;
    return (long)(resident * (unsigned long)sysconf(_SC_PAGESIZE) / 1024);
}

long clinux_release_read_only_segments(long *resident_before, long *resident_after) {
    *resident_before = resident_kilobytes();
    size_t released = 0;
    dl_iterate_phdr(release_read_only_segments, &released);
    *resident_after = resident_kilobytes();
    return (long)(released / 1024);
}
