import Foundation
@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
@testable import OutboxTelemetry
import Synchronization
import Testing

/// The queue leaves an origin's wake-ups during replay to the replayer: when an outcome makes
/// another lane ready while the worker goes on with its own, a free slot starts that lane at
/// once instead of after the worker's next operation. The source here never wakes anyone.
@Suite("Replayer: a worker wakes its loop")
struct ReplayerWakeTests {
    /// The lanes of ``ReplayerLaneTests/LaneSource``, with one operation held back (not
    /// pending) until another completes: a dependency in another lane.
    final class GatedSource: ReplaySource, Sendable {
        let lanes: ReplayerLaneTests.LaneSource
        let gate: UUID
        let gated: UUID

        init(_ requests: [OperationRequest], gated: UUID, behind gate: UUID) {
            lanes = ReplayerLaneTests.LaneSource(requests)
            lanes.recordSoon(gated, OperationState(status: .failed), written: {})
            self.gate = gate
            self.gated = gated
        }

        func takeWork(for origin: Origin, now: Int64) -> ReplayWork { lanes.takeWork(for: origin, now: now) }
        func record(_ id: UUID, _ state: OperationState) async { recordSoon(id, state, written: {}) }

        func recordSoon(_ id: UUID, _ state: OperationState, written: @escaping @Sendable () -> Void) {
            lanes.recordSoon(id, state, written: written)
            if id == gate, state.status == .completed { lanes.recordSoon(gated, OperationState(), written: {}) }
        }

        var originsWithWork: [Origin] { lanes.originsWithWork }
        var forcedOffline: Bool { false }
    }

    @Test func aLaneMadeReadyByAnOutcomeStartsBesideTheWorkersNextOperation() async throws {
        let clock = ManualReplayClock()
        let a1 = ReplayerTests.request("a1", createdAt: clock.nowMilliseconds)
        let a2 = ReplayerTests.request("a2", createdAt: clock.nowMilliseconds + 1)
        let b1 = ReplayerTests.request("b1", createdAt: clock.nowMilliseconds + 2)
        // a1, a2 in lane a; b1 in lane b, which may go only once a1 completed.
        let source = GatedSource([a1, a2, b1], gated: b1.id, behind: a1.id)
        let transport = ReplayerLaneTests.HeldTransport()
        let replayer = ReplayerLaneTests.twoSlotReplayer(source, transport, clock)
        // A replayer that never starts b1 beside a2 ends the stream here, and the checks fail.
        let watchdog = transport.endsAfterThirtySeconds()
        defer { watchdog.cancel() }
        await replayer.kick(ReplayerTests.origin)
        var events = transport.events.makeAsyncIterator()
        let first = await events.next()
        #expect(first?.body == "a1" && first?.inFlight == ["a1"])
        // a2 stays held: b1, ready once a1 completed, must not wait for it.
        transport.answer("a1")
        var sent: [ReplayerLaneTests.HeldTransport.Sent] = []
        while sent.count < 2, let event = await events.next() { sent.append(event) }
        #expect(Set(sent.map(\.body)) == ["a2", "b1"], "\(sent.map(\.body))")
        #expect(sent.last?.inFlight == ["a2", "b1"], "b1 waited for a2: \(sent.map(\.inFlight))")
        transport.answer("a2")
        transport.answer("b1")
    }
}
