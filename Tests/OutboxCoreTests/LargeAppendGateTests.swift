import Dispatch
import Glibc
@testable import OutboxQueue
import Synchronization
import Testing

/// Large bodies enter the log a few at a time: within the limit at once, beyond it in arrival
/// order as earlier ones finish, and always one when nothing else is in flight.
@Suite("Large append gate")
struct LargeAppendGateTests {
    /// Waits (bounded) until `started` holds `count` entries; the gate starts waiting appends
    /// on a queue of its own.
    private func waitUntil(_ started: borrowing Mutex<[Int]>, has count: Int) -> [Int] {
        for _ in 0..<2000 {
            let now = started.withLock { $0 }
            if now.count >= count { return now }
            usleep(1000)
        }
        return started.withLock { $0 }
    }

    @Test func appendsWithinTheLimitStartAtOnce_LaterOnesInOrderAsRoomComes() {
        let gate = LargeAppendGate(limit: 10)
        let started = Mutex<[Int]>([])
        gate.admit(4) { started.withLock { $0.append(1) } }
        gate.admit(6) { started.withLock { $0.append(2) } }
        #expect(started.withLock { $0 } == [1, 2], "both fit: started in the caller")
        gate.admit(5) { started.withLock { $0.append(3) } }
        gate.admit(1) { started.withLock { $0.append(4) } }
        #expect(started.withLock { $0 } == [1, 2], "no room: the small one waits behind the first in line")
        #expect(gate.load.waiting == 2)
        gate.release(4)
        #expect(gate.load.waiting == 2, "room for 4 of the 5 the first in line needs")
        gate.release(6)
        #expect(waitUntil(started, has: 4) == [1, 2, 3, 4])
        #expect(gate.load.inFlight == 6)
        gate.release(5)
        gate.release(1)
        #expect(gate.load == (0, 0))
    }

    @Test func oneAppendLargerThanTheLimit_GoesAloneWhenNothingElseIsInFlight() {
        let gate = LargeAppendGate(limit: 10)
        let started = Mutex<[Int]>([])
        gate.admit(25) { started.withLock { $0.append(1) } }
        gate.admit(2) { started.withLock { $0.append(2) } }
        #expect(started.withLock { $0 } == [1])
        gate.release(25)
        #expect(waitUntil(started, has: 2) == [1, 2])
        gate.release(2)
        #expect(gate.load == (0, 0))
    }
}
