#define _GNU_SOURCE
#include <sys/socket.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include "CSystem.h"

int csystem_accept4(int fd, struct sockaddr *addr, socklen_t *length, int flags) {
    return accept4(fd, addr, length, flags);
}

int csystem_pipe2(int fds[2], int flags) {
    return pipe2(fds, flags);
}

int csystem_wait_exit_without_reaping(pid_t pid, int *status, int *signaled) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    int rc;
    do {
        rc = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT);
    } while (rc == -1 && errno == EINTR);
    if (rc != 0) return -1;
    *signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    *status = info.si_status;
    return 0;
}
