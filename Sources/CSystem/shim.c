#define _GNU_SOURCE
#include <sys/socket.h>
#include "CSystem.h"

int csystem_accept4(int fd, struct sockaddr *addr, socklen_t *length, int flags) {
    return accept4(fd, addr, length, flags);
}
