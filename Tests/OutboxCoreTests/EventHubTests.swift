import Foundation
@testable import OutboxModel
@testable import OutboxTelemetry
import Synchronization
import Testing

/// The hub keeps operation events as values and renders them when read: a listener and a
/// client resuming with `Last-Event-ID` get the text each event was always rendered as.
@Suite("Event hub: events kept as values, rendered when read")
struct EventHubTests {
    static let events = [
        OperationEvent(id: UUID(uuidString: "0F8E4C1A-1111-4222-8333-444455556666")!, status: "pending", retryCount: 0,
                       lastError: nil, origin: Origin(scheme: .http, host: "127.0.0.1", port: 9000), orderingKey: nil),
        OperationEvent(id: UUID(), status: "inProgress", retryCount: 3, lastError: "connect failed: \"refused\"\n\u{1}",
                       origin: Origin(scheme: .https, host: "api.example", port: 443), orderingKey: "user-7"),
        OperationEvent(id: UUID(), status: "removed", retryCount: 12_345, lastError: "é ☃",
                       origin: Origin(scheme: .http, host: "::1", port: 8080), orderingKey: #"a\b"#),
    ]

    /// An event's text as the hub rendered every event before it kept values: the `data:` line
    /// from the `JSON` tree.
    static func reference(id: UInt64, _ event: OperationEvent) -> String {
        "id: \(id)\nevent: operation\ndata: \(event.json.rendered())\n\n"
    }

    @Test(arguments: events)
    func anOperationEventRendersAsItsJSON(event: OperationEvent) {
        #expect(HubEvent.operation(event).rendered(id: 42) == Self.reference(id: 42, event))
    }

    @Test func aListenerGetsEachEventRenderedAndWokenOnce() {
        let hub = EventHub()
        let wakes = Atomic<Int>(0)
        let subscription = hub.subscribe(lastEventID: nil) { wakes.add(1, ordering: .relaxed) }
        for event in Self.events { hub.publish(.operation(event)) }
        hub.publish("connectivity", .object([("mode", .string("offline"))]))
        let (bytes, overflowed) = subscription.take()
        let expected = Self.events.enumerated().map { Self.reference(id: UInt64($0.offset + 1), $0.element) }.joined()
            + "id: 4\nevent: connectivity\ndata: {\"mode\":\"offline\"}\n\n"
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
        #expect(!overflowed)
        // Woken when the backlog went from empty to not: once for the four events.
        #expect(wakes.load(ordering: .relaxed) == 1)
        subscription.cancel()
    }

    @Test func eventsPublishedWithNoListenerAreResumedByLastEventID() {
        let hub = EventHub()
        for event in Self.events { hub.publish(.operation(event)) }
        #expect(hub.listenerCount == 0)
        let resumed = hub.subscribe(lastEventID: "1") {}
        let expected = Self.reference(id: 2, Self.events[1]) + Self.reference(id: 3, Self.events[2])
        #expect(String(decoding: resumed.take().bytes, as: UTF8.self) == expected)
        let fromStart = hub.subscribe(lastEventID: "0") {}
        #expect(String(decoding: fromStart.take().bytes, as: UTF8.self)
                == Self.reference(id: 1, Self.events[0]) + expected)
        resumed.cancel()
        fromStart.cancel()
    }

    @Test func theRingKeepsTheNewestEventsAndResetsBeyondThem() {
        let hub = EventHub()
        let extra = 5
        let total = EventHub.retained + extra
        for n in 0..<total {
            var event = Self.events[n % Self.events.count]
            event.retryCount = n
            hub.publish(.operation(event))
        }
        // The oldest kept event is number extra + 1: resuming just before it gives all of them.
        let whole = hub.subscribe(lastEventID: String(extra)) {}
        let text = String(decoding: whole.take().bytes, as: UTF8.self)
        var last = Self.events[(total - 1) % Self.events.count]
        last.retryCount = total - 1
        #expect(text.hasSuffix(Self.reference(id: UInt64(total), last)))
        #expect(text.components(separatedBy: "\nevent: operation\n").count - 1 == EventHub.retained)
        #expect(text.hasPrefix("id: \(extra + 1)\n"))
        // One further back is gone: a reset that carries the newest id.
        let gone = hub.subscribe(lastEventID: String(extra - 1)) {}
        #expect(String(decoding: gone.take().bytes, as: UTF8.self) == "id: \(total)\nevent: reset\ndata: {}\n\n")
        whole.cancel()
        gone.cancel()
    }
}
