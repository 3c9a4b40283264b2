import Foundation
import Glibc
import Testing

/// What a test needs from the machine beyond the toolchain (a program such as `openssl` or
/// `chromium`, a Python module) and what happens when it is missing: on a developer's machine
/// the test is skipped with a comment naming what to install; under `CI=true` it fails with the
/// same words instead, because a CI run that skips a test says nothing about what the test
/// covers, and `.ci/run` installs everything these name.
public enum Prerequisite {
    /// `CI=true`, as `.ci/run` and hosted CI services set it.
    public static let isStrict = ProcessInfo.processInfo.environment["CI"] == "true"

    /// Thrown from the condition: Swift Testing records it as an issue of the test it guards.
    public struct Missing: Error, CustomStringConvertible {
        public let description: String
    }

    /// Whether the test runs; throws where a skip would hide a missing tool from CI.
    public static func check(_ present: Bool, _ missing: String) throws -> Bool {
        if present { return true }
        if isStrict { throw Missing(description: "CI=true and a prerequisite is missing (a CI run skips nothing): \(missing)") }
        return false
    }
}

extension Trait where Self == ConditionTrait {
    /// `.enabled(if:)` for what the machine must provide: skipped where `present` is false,
    /// failed there under `CI=true` (`Prerequisite`).
    public static func requires(_ present: @autoclosure @escaping @Sendable () -> Bool, _ missing: String,
                                sourceLocation: SourceLocation = #_sourceLocation) -> Self {
        .enabled(if: try Prerequisite.check(present(), missing), Comment(rawValue: missing), sourceLocation: sourceLocation)
    }
}

extension Prerequisite {
    /// The first Python 3 that imports every module in `modules`: the `python3` on PATH (which
    /// may be a pyenv's), else Debian's `/usr/bin/python3`, the one apt's `python3-*` packages
    /// (`python3-selenium`, `python3-prometheus-client`) install for. nil when neither does.
    public static func python(importing modules: [String]) -> String? {
        var candidates: [String] = []
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let path = String(directory) + "/python3"
            if access(path, X_OK) == 0 { candidates.append(path); break }
        }
        candidates.append("/usr/bin/python3")
        let program = modules.map { "import \($0)" }.joined(separator: "; ")
        return candidates.first { imports(program, python: $0) }
    }

    /// Runs `python -c program` with its output discarded; true when it exits 0.
    private static func imports(_ program: String, python: String) -> Bool {
        guard access(python, X_OK) == 0 else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-c", program]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
