#define _GNU_SOURCE
#include <sys/socket.h>
#include <unistd.h>
#include "CSystem.h"

int csystem_accept4(int fd, struct sockaddr *addr, socklen_t *length, int flags) {
    return accept4(fd, addr, length, flags);
}

int csystem_pipe2(int fds[2], int flags) {
    return pipe2(fds, flags);
}
