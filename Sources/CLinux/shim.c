#define _GNU_SOURCE
#include <sys/socket.h>
#include "CLinux.h"

int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    return accept4(fd, address, length, flags);
}
