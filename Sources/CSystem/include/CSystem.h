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
#include <stdint.h>

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

#endif
