import Foundation
@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
import Synchronization
import Testing

/// The lane against a log whose confirmations the test gives one by one: what a `kill -9` would
/// send again at any instant (the operation in flight plus the outcomes not yet written) stays
/// within the contract's bound, and the lane goes on as each outcome is written.
@Suite("Replayer: bounded redelivery", .timeLimit(.minutes(2)))
struct ReplayerOutcomeWindowTests {
    /// Answers 200 and notes, at each send, how many outcomes the source holds unwritten.
    final class SamplingTransport: ReplayTransport, Sendable {
        let source: ReplayerTests.ScriptedSource
        let unwrittenAtSend = Mutex<[Int]>([])

        init(_ source: ReplayerTests.ScriptedSource) { self.source = source }

        func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                  maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError> {
            let unwritten = ReplayerOutcomeWindowTests.heldOutcomes(source)
            unwrittenAtSend.withLock { $0.append(unwritten) }
            return .success(CollectedResponse(head: HTTPResponseHead(status: 200), body: [], truncated: false))
        }
    }

    /// Held confirmations of attempt outcomes (the inProgress records are not waited for).
    static func heldOutcomes(_ source: ReplayerTests.ScriptedSource) -> Int {
        source.heldWrites.withLock { held in held.count { $0.state.status != .inProgress } }
    }

    /// Gives the oldest held outcome confirmation: its record is on disk now.
    static func writeOldestOutcome(_ source: ReplayerTests.ScriptedSource) {
        let written = source.heldWrites.withLock { held -> (@Sendable () -> Void)? in
            guard let index = held.firstIndex(where: { $0.state.status != .inProgress }) else { return nil }
            return held.remove(at: index).written
        }
        written?()
    }

    @Test func aLaneSendsOnlyWhileFewerThan32OutcomesAreUnwritten_AndGoesOnAsEachIsWritten() async throws {
        let clock = ManualReplayClock()
        let count = 100
        let operations = (0..<count).map { ReplayerTests.request("w\($0)", createdAt: clock.nowMilliseconds + Int64($0)) }
        let source = ReplayerTests.ScriptedSource(operations, holdsWrites: true)
        let transport = SamplingTransport(source)
        let replayer = ReplayerTests.replayer(source: source, transport: transport, clock: clock, retry: OutboxConfig.Retry())

        await replayer.kick(ReplayerTests.origin)
        for written in 0..<count {
            // The lane runs until the window is full (or the queue is empty), then waits.
            let full = min(OutcomeWindow.redeliveryBound, count - written)
            await source.waiters.waitUntil { Self.heldOutcomes(source) >= full }
            try #require(Self.heldOutcomes(source) == full,
                         "after \(written) outcomes written: \(Self.heldOutcomes(source)) unwritten, the window holds \(full)")
            Self.writeOldestOutcome(source)
        }
        await source.waiters.waitUntil { operations.allSatisfy { source.state($0.id)?.status == .completed } }

        #expect(operations.allSatisfy { source.state($0.id)?.status == .completed })
        let samples = transport.unwrittenAtSend.withLock { $0 }
        #expect(samples.count == count, "each operation sent once")
        // A kill during any send would send again that one plus the unwritten outcomes.
        #expect((samples.max() ?? 0) + 1 <= OutcomeWindow.redeliveryBound,
                "a send with \(samples.max() ?? 0) outcomes unwritten")
        #expect(Self.heldOutcomes(source) == 0)
    }
}
