/// A failure of the harness or of something it waited for, carrying enough context (what was
/// awaited, what arrived, the proxy's stderr) to diagnose a red test without a debugger.
struct HarnessError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
