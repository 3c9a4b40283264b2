import Foundation
import OutboxModel
import Synchronization

/// The live feed behind `GET /admin/events`: every operation, origin and connectivity change as
/// one server-sent event, kept for late readers and pushed to the ones listening.
///
/// An event is kept as a small value (``HubEvent``) and rendered (`id:`, `event:`, `data:`
/// lines) only when someone reads it: once, when it happens, for the listeners there are then
/// (the same bytes go to every one), or when a client resumes with `Last-Event-ID`. With no
/// listener, publishing stores the value and renders nothing: every stored request publishes.
/// The last `retained` events stay in a ring, so a client that reconnects with `Last-Event-ID`
/// gets what it missed; one that missed more (or names an id this process never gave) gets
/// `event: reset` and goes on from now. Each listener has its own bounded backlog: a client
/// that stops reading is cut off once it is `maxPendingBytes` behind, so a stalled reader can
/// never slow the publishers or grow memory.
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
        var ring: [(id: UInt64, event: HubEvent)] = []
        var start = 0
        var listeners: [ObjectIdentifier: EventSubscription] = [:]

        var oldestID: UInt64? { ring.isEmpty ? nil : ring[start].id }

        func events(after id: UInt64) -> [UInt8] {
            var bytes: [UInt8] = []
            for offset in 0..<ring.count {
                let kept = ring[(start + offset) % ring.count]
                if kept.id > id { kept.event.render(id: kept.id, into: &bytes) }
            }
            return bytes
        }
    }

    private let state = Mutex(State())

    package init() {}

    /// Sends one event to every listener; `data` is written as one line of JSON.
    package func publish(_ event: String, _ data: JSON) {
        publish(.document(name: event, data: data))
    }

    /// Keeps `event` in the ring and sends it to every listener, rendered once for all of them
    /// (and not at all while nobody listens).
    package func publish(_ event: HubEvent) {
        let woken = state.withLock { state -> [EventSubscription] in
            let id = state.nextID
            state.nextID += 1
            if state.ring.count < Self.retained {
                state.ring.append((id, event))
            } else {
                state.ring[state.start] = (id, event)
                state.start = (state.start + 1) % Self.retained
            }
            guard !state.listeners.isEmpty else { return [] }
            var bytes: [UInt8] = []
            event.render(id: id, into: &bytes)
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
                    subscription.start(with: state.events(after: id))
                } else {
                    // The reset carries the newest id, so the client's next reconnect resumes here.
                    subscription.start(with: Array("id: \(newest)\nevent: reset\ndata: {}\n\n".utf8))
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

/// One event as the hub keeps it until someone reads it. `operation` is the one published for
/// every stored request and every replay step, so it holds its fields as they are (no `JSON`
/// tree, no text) and renders itself straight into bytes; the rare others carry their `JSON`.
package enum HubEvent: Sendable {
    /// `event: operation`, `data: {"id","status","retryCount","lastError","origin","orderingKey"}`.
    case operation(OperationEvent)
    /// Any other event: its name and its data, rendered with `JSON.rendered()`.
    case document(name: String, data: JSON)

    /// The event's server-sent-event text with `id`: `id:`, `event:` and `data:` lines and the
    /// blank line that ends it.
    func render(id: UInt64, into out: inout [UInt8]) {
        out.append(literal: "id: ")
        JSON.appendDigits(UInt(id), to: &out)
        out.append(literal: "\nevent: ")
        switch self {
        case .operation(let event):
            out.append(literal: "operation\ndata: ")
            event.appendJSON(to: &out)
        case .document(let name, let data):
            out.append(contentsOf: name.utf8)
            out.append(literal: "\ndata: ")
            out.append(contentsOf: data.rendered().utf8)
        }
        out.append(literal: "\n\n")
    }

    /// The event's text alone, as a client reads it.
    package func rendered(id: UInt64) -> String {
        var bytes: [UInt8] = []
        render(id: id, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

}

/// A change of one operation, as `event: operation` announces it: its new `status` (an
/// `OperationStatus` raw value, or `removed`), retry count and last error, and its lane.
package struct OperationEvent: Sendable, Equatable {
    package var id: UUID
    package var status: String
    package var retryCount: Int
    package var lastError: String?
    package var origin: Origin
    package var orderingKey: String?

    package init(id: UUID, status: String, retryCount: Int, lastError: String?, origin: Origin, orderingKey: String?) {
        self.id = id
        self.status = status
        self.retryCount = retryCount
        self.lastError = lastError
        self.origin = origin
        self.orderingKey = orderingKey
    }

    /// The `data:` JSON, member for member the text of `json.rendered()`.
    package var json: JSON {
        .object([("id", .string(id.lowercasedText)), ("status", .string(status)), ("retryCount", .int(retryCount)),
                 ("lastError", .string(lastError)), ("origin", .string(origin.description)),
                 ("orderingKey", .string(orderingKey))])
    }

    func appendJSON(to out: inout [UInt8]) {
        out.append(literal: #"{"id":""#)
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: UUIDText.textLength))
        out.withUnsafeMutableBytes { UUIDText.write(id, into: UnsafeMutableRawBufferPointer(rebasing: $0[start...])) }
        out.append(literal: #"","status":"#)
        JSON.appendQuoted(status, to: &out)
        out.append(literal: #","retryCount":"#)
        JSON.appendInt(retryCount, to: &out)
        out.append(literal: #","lastError":"#)
        Self.appendOptional(lastError, to: &out)
        out.append(literal: #","origin":"#)
        JSON.appendQuoted(origin.description, to: &out)
        out.append(literal: #","orderingKey":"#)
        Self.appendOptional(orderingKey, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    private static func appendOptional(_ text: String?, to out: inout [UInt8]) {
        if let text { JSON.appendQuoted(text, to: &out) } else { out.append(literal: "null") }
    }
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

    /// The events a resuming client missed, however many: the ring bounds them, and the bound
    /// on the backlog is for a listener falling behind, not for one catching up (a gap of more
    /// than `maxPendingBytes` would otherwise drop it at once, every time it came back).
    fileprivate func start(with bytes: [UInt8]) {
        backlog.withLock { $0.bytes = bytes }
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
