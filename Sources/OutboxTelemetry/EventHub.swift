import OutboxModel
import Synchronization

/// The live feed behind `GET /admin/events`: every operation, origin and connectivity change as
/// one server-sent event, kept for late readers and pushed to the ones listening.
///
/// An event is rendered once, when it happens (`id:`, `event:`, `data:` lines), and the same
/// bytes go to every listener. The last `retained` events stay in a ring, so a client that
/// reconnects with `Last-Event-ID` gets what it missed; one that missed more (or names an id
/// this process never gave) gets `event: reset` and goes on from now. Each listener has its own
/// bounded backlog: a client that stops reading is cut off once it is `maxPendingBytes`
/// behind, so a stalled reader can never slow the publishers or grow memory.
package final class EventHub: Sendable {
    /// Events kept for `Last-Event-ID`.
    package static let retained = 10_000
    /// Bytes a listener may fall behind before it is dropped: about 1 500 operation events. A
    /// dropped client loses nothing: it reconnects with `Last-Event-ID` and the ring, 10 000
    /// events deep, fills the gap.
    package static let maxPendingBytes = 256 << 10

    private struct State {
        var nextID: UInt64 = 1
        /// The newest `retained` events, oldest first once full (`start` marks the oldest).
        var ring: [(id: UInt64, bytes: [UInt8])] = []
        var start = 0
        var listeners: [ObjectIdentifier: EventSubscription] = [:]

        var oldestID: UInt64? { ring.isEmpty ? nil : ring[start].id }

        func events(after id: UInt64) -> [UInt8] {
            var bytes: [UInt8] = []
            for offset in 0..<ring.count {
                let event = ring[(start + offset) % ring.count]
                if event.id > id { bytes += event.bytes }
            }
            return bytes
        }
    }

    private let state = Mutex(State())

    package init() {}

    /// Renders and sends one event to every listener; `data` is written as one line of JSON.
    package func publish(_ event: String, _ data: JSON) {
        let woken = state.withLock { state -> [EventSubscription] in
            let id = state.nextID
            state.nextID += 1
            let bytes = Array("id: \(id)\nevent: \(event)\ndata: \(data.rendered())\n\n".utf8)
            if state.ring.count < Self.retained {
                state.ring.append((id, bytes))
            } else {
                state.ring[state.start] = (id, bytes)
                state.start = (state.start + 1) % Self.retained
            }
            return state.listeners.values.filter { $0.append(bytes) }
        }
        // Outside the lock: a listener's wake-up hops to its own thread.
        for listener in woken { listener.wake() }
    }

    /// A new listener. `lastEventID` is the client's `Last-Event-ID` (nil: from now on). The
    /// subscription starts with the events it missed, or with `event: reset` when they are gone.
    /// `wake` runs (on the publisher's thread) each time the subscription goes from nothing to
    /// read to something; the listener then calls `take` on its own thread.
    package func subscribe(lastEventID: String?, wake: @escaping @Sendable () -> Void) -> EventSubscription {
        let subscription = EventSubscription(hub: self, wake: wake)
        state.withLock { state in
            let newest = state.nextID - 1
            if let text = lastEventID?.trimmingASCIISpaces, !text.isEmpty {
                if let id = UInt64(text), id <= newest, id + 1 >= (state.oldestID ?? newest + 1) {
                    _ = subscription.append(state.events(after: id))
                } else {
                    // The reset carries the newest id, so the client's next reconnect resumes here.
                    _ = subscription.append(Array("id: \(newest)\nevent: reset\ndata: {}\n\n".utf8))
                }
            }
            state.listeners[ObjectIdentifier(subscription)] = subscription
        }
        return subscription
    }

    fileprivate func remove(_ subscription: EventSubscription) {
        _ = state.withLock { $0.listeners.removeValue(forKey: ObjectIdentifier(subscription)) }
    }

    /// How many clients listen, for tests and metrics.
    package var listenerCount: Int { state.withLock { $0.listeners.count } }
}

/// One listener's backlog: bytes published and not yet taken, bounded by
/// `EventHub.maxPendingBytes`. Past the bound it stops collecting and says so: the listener
/// then closes its connection rather than send a stream with a hole in it.
package final class EventSubscription: Sendable {
    private struct Backlog {
        var bytes: [UInt8] = []
        var overflowed = false
        var cancelled = false
    }

    private let backlog = Mutex(Backlog())
    private let wakeUp: @Sendable () -> Void
    private let hub: EventHub

    fileprivate init(hub: EventHub, wake: @escaping @Sendable () -> Void) {
        self.hub = hub
        wakeUp = wake
    }

    /// Adds bytes; true when the listener should be woken (its backlog was empty).
    fileprivate func append(_ bytes: [UInt8]) -> Bool {
        backlog.withLock { backlog in
            guard !backlog.cancelled, !backlog.overflowed, !bytes.isEmpty else { return false }
            let wasEmpty = backlog.bytes.isEmpty
            if backlog.bytes.count + bytes.count > EventHub.maxPendingBytes {
                backlog.overflowed = true
                backlog.bytes = []
                return true
            }
            backlog.bytes += bytes
            return wasEmpty
        }
    }

    fileprivate func wake() { wakeUp() }

    /// Whether the listener fell too far behind and is to be dropped.
    package var hasOverflowed: Bool { backlog.withLock { $0.overflowed } }

    /// Everything published since the last take, and whether the backlog overflowed (the
    /// listener is then to be dropped).
    package func take() -> (bytes: [UInt8], overflowed: Bool) {
        backlog.withLock { backlog in
            let taken = backlog.bytes
            backlog.bytes = []
            return (taken, backlog.overflowed)
        }
    }

    /// Stops listening; safe to repeat.
    package func cancel() {
        backlog.withLock { $0.cancelled = true; $0.bytes = [] }
        hub.remove(self)
    }
}

private extension String {
    var trimmingASCIISpaces: Substring {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}
