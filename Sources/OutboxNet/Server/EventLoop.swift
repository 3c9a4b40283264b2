import CSystem
import Glibc
import OutboxModel
import Synchronization

/// An object that owns one file descriptor registered with an ``EventLoop``.
///
/// The loop calls `handleEvents` on its own thread with the epoll event mask; the handler
/// never runs concurrently with anything else on that loop.
package protocol EventHandler: AnyObject {
    func handleEvents(_ events: UInt32)
}

/// An object with deadlines (header, idle, response timeouts) that the loop checks on each sweep.
package protocol DeadlineTracked: AnyObject {
    func checkDeadlines(now: UInt64)
}

/// One thread, one epoll instance: every socket of a connection lives on exactly one loop, so
/// connection state needs no locks.
///
/// Cross-thread work enters only through ``execute(_:)`` (a locked job list plus an eventfd
/// wake-up, written only by the job that finds the list empty). Timeouts are coarse: tracked objects are swept every `sweepInterval`, which costs
/// a few thousand comparisons per second and needs no per-request timer allocation.
public final class EventLoop: WakeUpTarget, @unchecked Sendable {
    // All stored properties except `jobs` are touched only on the loop thread.
    private let epollFD: Int32
    private let wakeFD: Int32
    private var handlers: [EventHandler?] = []
    private var generations: [UInt32] = []
    private var tracked: [ObjectIdentifier: DeadlineTracked] = [:]
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private var stopping = false
    private var nextSweep: UInt64 = 0
    let sweepInterval: UInt64
    /// Monotonic time in nanoseconds, refreshed after every `epoll_wait`.
    package private(set) var now: UInt64 = MonotonicClock.nanos()
    /// A reusable read buffer: one per loop, since only one read runs at a time on it.
    let scratch: UnsafeMutableRawBufferPointer
    let index: Int
    private var thread: pthread_t?
    /// The loop thread, once it runs (0 before): lets a caller tell whether it is on the loop.
    private let runningThread = Atomic<pthread_t>(0)
    /// Streams with output queued during this tick, flushed together after the tick's events:
    /// a response head, body and last chunk, or a request head and body, leave in one send.
    private var pendingFlush: [SocketStream] = []
    /// The batch being flushed, while `pendingFlush` collects what its flushes schedule.
    private var flushing: [SocketStream] = []
    /// A job was queued from the loop thread itself without the eventfd wake-up: the loop
    /// runs it before it next waits (a task resumed by a response, on a loop's task executor).
    private var localJobsQueued = false

    package init(index: Int, sweepInterval: Double) throws(SystemError) {
        self.index = index
        self.sweepInterval = UInt64(max(0.005, sweepInterval) * 1e9)
        let epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw SystemError("epoll_create1") }
        let efd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard efd >= 0 else {
            close(epfd)
            throw SystemError("eventfd")
        }
        epollFD = epfd
        wakeFD = efd
        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        _ = csystem_epoll_ctl(epfd, EPOLL_CTL_ADD, efd, EPOLLIN.rawValue, UInt64.max)
    }

    deinit {
        close(epollFD)
        close(wakeFD)
        scratch.deallocate()
    }

    /// Starts the loop on a new thread.
    package func start() {
        let box = Unmanaged.passRetained(self)
        var tid = pthread_t()
        pthread_create(&tid, nil, { raw in
            let loop = Unmanaged<EventLoop>.fromOpaque(raw!).takeRetainedValue()
            loop.run()
            return nil
        }, box.toOpaque())
        thread = tid
    }

    /// Waits for the loop thread to end after ``stop()``.
    package func join() {
        if let thread { pthread_join(thread, nil) }
    }

    /// True on the loop's own thread.
    package var isCurrent: Bool { runningThread.load(ordering: .relaxed) == pthread_self() }

    /// Runs `job` on the loop thread. Safe from any thread.
    public func execute(_ job: @escaping @Sendable () -> Void) {
        // Only the job that finds the list empty wakes the loop: the loop takes the whole list
        // after that wake-up, so a burst (a group commit's completions) costs one write.
        let wasEmpty = jobs.withLock { list -> Bool in
            list.append(job)
            return list.count == 1
        }
        guard wasEmpty else { return }
        // From the loop's own thread a wake-up would cost a write, an epoll_wait and a read
        // per job; the loop looks at this flag after each batch of events and before waiting.
        if isCurrent {
            localJobsQueued = true
            return
        }
        if WakeUpBatch.deferWakeUp(self) { return }
        wakeUp()
    }

    /// Writes the eventfd: the loop returns from `epoll_wait` and runs its jobs.
    package func wakeUp() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Ends the loop after the current iteration.
    package func stop() {
        execute { [self] in stopping = true }
    }

    // MARK: Registration (loop thread only)

    package func register(fd: Int32, handler: EventHandler, events: UInt32) {
        let i = Int(fd)
        if i >= handlers.count {
            let newCount = max(i + 1, handlers.count * 2, 64)
            handlers.append(contentsOf: repeatElement(nil, count: newCount - handlers.count))
            generations.append(contentsOf: repeatElement(0, count: newCount - generations.count))
        }
        generations[i] &+= 1
        handlers[i] = handler
        _ = csystem_epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, events, key(fd))
    }

    func modify(fd: Int32, events: UInt32) {
        _ = csystem_epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, events, key(fd))
    }

    package func unregister(fd: Int32) {
        _ = csystem_epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, 0, 0)
        let i = Int(fd)
        if i < handlers.count {
            handlers[i] = nil
            generations[i] &+= 1
        }
    }

    func scheduleFlush(_ stream: SocketStream) {
        pendingFlush.append(stream)
    }

    /// Writes what this turn queued so far now, rather than after its events (loop thread only):
    /// for a caller with more to do before the turn ends that need not delay the write.
    package func flushNow() {
        flushPending()
    }

    private func flushPending() {
        // A flush can queue more output elsewhere (drain callbacks): repeat until quiet. The
        // two lists trade places, so neither is copied nor allocated again tick after tick.
        while !pendingFlush.isEmpty {
            swap(&pendingFlush, &flushing)
            for stream in flushing { stream.flushScheduled() }
            flushing.removeAll(keepingCapacity: true)
        }
    }

    package func track(_ object: DeadlineTracked) {
        tracked[ObjectIdentifier(object)] = object
    }

    package func untrack(_ object: DeadlineTracked) {
        tracked.removeValue(forKey: ObjectIdentifier(object))
    }

    // The generation in the event's data tells a stale event (fd closed and reused within
    // one epoll_wait batch) from a live one.
    private func key(_ fd: Int32) -> UInt64 {
        UInt64(generations[Int(fd)]) << 32 | UInt64(UInt32(bitPattern: fd))
    }

    // MARK: The loop

    private func run() {
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        runningThread.store(pthread_self(), ordering: .relaxed)
        nextSweep = MonotonicClock.nanos() + sweepInterval
        while !stopping {
            if localJobsQueued { runJobs() }
            let timeout: Int32
            if tracked.isEmpty {
                timeout = -1
            } else {
                let current = MonotonicClock.nanos()
                timeout = nextSweep > current ? Int32(min((nextSweep - current) / 1_000_000 + 1, 1000)) : 0
            }
            let n = epoll_wait(epollFD, events, Int32(capacity), timeout)
            now = MonotonicClock.nanos()
            if n < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in 0..<Int(n) {
                let data = csystem_epoll_event_data(events + i)
                let mask = csystem_epoll_event_events(events + i)
                if data == UInt64.max {
                    drainJobs()
                    continue
                }
                let fd = Int(UInt32(truncatingIfNeeded: data))
                guard fd < handlers.count, UInt32(truncatingIfNeeded: data >> 32) == generations[fd],
                      let handler = handlers[fd] else { continue }
                handler.handleEvents(mask)
            }
            if localJobsQueued { runJobs() }
            flushPending()
            if now >= nextSweep {
                nextSweep = now + sweepInterval
                // Copy: a check may close its object, which untracks it.
                for object in Array(tracked.values) { object.checkDeadlines(now: now) }
            }
        }
        drainJobs()
    }

    private func drainJobs() {
        var counter: UInt64 = 0
        _ = read(wakeFD, &counter, 8)
        runJobs()
    }

    private func runJobs() {
        while true {
            localJobsQueued = false
            let batch = jobs.withLock { list -> [@Sendable () -> Void] in
                let taken = list
                list.removeAll(keepingCapacity: true)
                return taken
            }
            if batch.isEmpty { break }
            for job in batch { job() }
        }
        flushPending()
    }
}

/// A value that may cross threads but is only used on the loop that made it.
///
/// Carrying a loop-confined object through a `@Sendable` closure (Dispatch callbacks, signal
/// handlers) needs this wrapper; whoever unwraps it must be on `loop` (by `loop.execute`).
package struct LoopBound<Value>: @unchecked Sendable {
    package let value: Value
    package let loop: EventLoop

    package init(value: Value, loop: EventLoop) {
        self.value = value
        self.loop = loop
    }
}

/// Durations for the monotonic clock (`MonotonicClock`) the deadlines use.
package enum Clock {
    package static func nanos(_ seconds: Double) -> UInt64 {
        seconds <= 0 ? 0 : UInt64(min(seconds, 1e9) * 1e9)
    }
}

/// A failed system call: the call's name and errno, for one log line.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let code: Int32
    init(_ call: String, code: Int32 = errno) {
        self.call = call
        self.code = code
    }
    public var description: String { "\(call): \(String(cString: strerror(code)))" }
}
