#define _GNU_SOURCE
#include <spawn.h>
#include <sys/socket.h>
#include <time.h>
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
    if (result == 0) result = posix_spawn(pid, path, &actions, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}

static _Thread_local uint64_t budget_deadline;
static _Thread_local uint64_t budget_allowance;

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

int clinux_budget_start(uint64_t allowance_ns) {
    if (budget_deadline != 0) return 0;
    budget_deadline = monotonic_ns() + allowance_ns;
    return 1;
}

void clinux_budget_end(void) { budget_deadline = 0; }

int clinux_budget_exceeded(void *unused) {
    (void)unused;
    return budget_deadline != 0 && monotonic_ns() > budget_deadline;
}

uint64_t clinux_budget_allowance(void) { return budget_allowance; }

void clinux_budget_set_allowance(uint64_t allowance_ns) { budget_allowance = allowance_ns; }
