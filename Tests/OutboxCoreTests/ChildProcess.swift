import Foundation

/// A program run to its end with its output collected: the tests' independent judges
/// (`openssl`, `sha256sum`) and the tools that set up a real server (`initdb`). Output is read
/// before waiting, so a child that prints more than a pipe holds cannot stall.
enum ChildProcess {
    /// Runs `program ARGUMENTS` and returns its exit status and what it printed on stdout, with
    /// stderr joined in unless `mergingErrors` is false (then stderr is left to the test's own).
    static func run(_ program: String, _ arguments: [String], mergingErrors: Bool = true) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        if mergingErrors { process.standardError = output }
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: printed, as: UTF8.self))
    }
}
