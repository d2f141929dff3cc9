// Linux system calls that Glibc's Swift module does not export.
#ifndef CLINUX_H
#define CLINUX_H
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <malloc.h>

/// accept4(2), declared by glibc only under _GNU_SOURCE.
int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/// Keeps up to `bytes` of freed memory at the top of the heap instead of returning it
/// to the kernel (mallopt M_TRIM_THRESHOLD).
static inline void clinux_keep_freed_memory(int bytes) { mallopt(M_TRIM_THRESHOLD, bytes); }
#endif
