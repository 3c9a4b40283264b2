#ifndef OUTBOX_CSYSTEM_H
#define OUTBOX_CSYSTEM_H

// Linux event and signal primitives that Swift's Glibc module does not export.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/types.h>
#include <stdint.h>
#include <stddef.h>

// epoll_event is packed on x86_64; these accessors keep Swift away from the layout.
static inline uint64_t csystem_epoll_event_data(const struct epoll_event *event) { return event->data.u64; }
static inline uint32_t csystem_epoll_event_events(const struct epoll_event *event) { return event->events; }

static inline int csystem_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &event);
}

// accept4 needs _GNU_SOURCE, which Swift's Glibc module is not built with.
int csystem_accept4(int fd, struct sockaddr *addr, socklen_t *length, int flags);
// pipe2 too: a pipe whose ends are close-on-exec from the start, for code that spawns children.
int csystem_pipe2(int fds[2], int flags);
// posix_spawn of `path` with stdin from /dev/null, stdout and stderr onto the given
// descriptors, every other descriptor closed, an empty signal mask, default dispositions for
// the usual signals, and a process group of its own. Returns 0 or an errno value.
int csystem_spawn(const char *path, char *const argv[], char *const envp[], int stdout_fd, int stderr_fd,
                  pid_t *pid);
// Blocks until child `pid` has exited, reaps it and reports how: its exit code, or the signal
// that ended it with *signaled = 1. Returns -1 (errno set) if `pid` is no child of ours.
int csystem_wait_exit(pid_t pid, int *status, int *signaled);

// CRC-32C (Castagnoli). `crc` is the value returned for the bytes before `data` (0 to start),
// so a checksum can be computed over several pieces. Uses the SSE4.2 `crc32` instruction when
// the CPU has it (checked once at run time), else a portable table-driven loop.
uint32_t csystem_crc32c(uint32_t crc, const void *data, size_t length);
// The table-driven implementation, always; tests compare it with the hardware one.
uint32_t csystem_crc32c_portable(uint32_t crc, const void *data, size_t length);
// 1 when `csystem_crc32c` uses the hardware instruction.
int csystem_crc32c_hardware(void);

#endif
