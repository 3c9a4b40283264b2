import CTestParallelism
import Foundation
import Testing

/// The test binary caps how many tests run at once before the testing library starts (see
/// `Tests/CTestParallelism`): without the cap, a resumed test waits behind every test not yet
/// begun, and the deadlines of real servers and processes run out meanwhile.
@Suite("Test binary: tests run a few per core at once")
struct TestParallelismTests {
    @Test func theWidthIsNamedBeforeTheTestingLibraryReadsIt() {
        let named = ProcessInfo.processInfo.environment["SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH"]
        let chosen = outbox_tests_parallelization_width()
        #expect(named != nil, "the load-time constructor did not run, and the environment named no width")
        if chosen > 0 {
            #expect(named == String(chosen))
            #expect(Int(chosen) == 4 * max(1, ProcessInfo.processInfo.activeProcessorCount))
        }
    }
}
