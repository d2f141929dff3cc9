// Linux system calls that Glibc's Swift module does not export.
#ifndef CLINUX_H
#define CLINUX_H
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

/// accept4(2), declared by glibc only under _GNU_SOURCE.
int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
#endif
