import Dispatch
import Foundation
import Synchronization
import Testing

/// A task executor whose jobs run on threads of the harness's own, never on Swift's
/// cooperative pool. The harness blocks in poll(2) while it waits for the proxy (that is what
/// makes its deadlines simple), and the cooperative pool has one thread per core: on a 2-core
/// CI machine two blocked tests used to stall every other test's continuations, so waits ran
/// out while the proxy had long since done its part. Here a job that finds no idle thread
/// gets a new one, so a blocked test holds up nobody but itself. Threads stay for later jobs.
final class HarnessExecutor: TaskExecutor {
    /// The one executor every integration suite runs on (through `.harnessThreads`).
    static let shared = HarnessExecutor()

    /// True inside a test that runs on this executor; the blocking socket calls check it.
    @TaskLocal static var isCurrent = false

    private struct Queue: ~Copyable {
        var jobs: [UnownedJob] = []
        /// Threads waiting for a job, or woken and about to take one.
        var idle = 0
    }

    private let queue = Mutex(Queue())
    private let available = DispatchSemaphore(value: 0)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let needsThread = queue.withLock { queue in
            queue.jobs.append(job)
            // Every queued job must have a thread that will take it without waiting for a
            // running (maybe blocked) job to end.
            guard queue.jobs.count > queue.idle else { return false }
            queue.idle += 1
            return true
        }
        if needsThread { startThread() }
        available.signal()
    }

    private func startThread() {
        let thread = Thread { [self] in
            while true {
                available.wait()
                let job = queue.withLock { queue in
                    queue.idle -= 1
                    return queue.jobs.removeFirst()
                }
                job.runSynchronously(on: asUnownedTaskExecutor())
                queue.withLock { $0.idle += 1 }
            }
        }
        thread.name = "outbox-test-harness"
        thread.start()
    }
}

/// Runs every test of a suite on `HarnessExecutor`: put `.harnessThreads` on each integration
/// suite. The socket helpers throw when called from a test without it.
struct HarnessThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(HarnessExecutor.shared) {
            try await HarnessExecutor.$isCurrent.withValue(true) {
                try await function()
            }
        }
    }
}

extension Trait where Self == HarnessThreadsTrait {
    /// The suite's tests run on the harness's own threads (see `HarnessExecutor`).
    static var harnessThreads: Self { HarnessThreadsTrait() }
}

extension HarnessExecutor {
    /// Throws when blocking socket work is about to run on Swift's cooperative pool: inside a
    /// task that is not a `.harnessThreads` test. Harness threads (the test upstream's) run
    /// outside any task and pass.
    static func requireOffCooperativePool(_ what: @autoclosure () -> String) throws {
        let inTask = withUnsafeCurrentTask { $0 != nil }
        if inTask && !isCurrent {
            throw HarnessError("\(what()) would block Swift's cooperative pool: give the suite the .harnessThreads trait")
        }
    }
}
