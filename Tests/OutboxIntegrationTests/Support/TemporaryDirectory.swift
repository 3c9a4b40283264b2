import Foundation
import Glibc

/// A fresh directory under the system temp dir, removed with everything in it on deinit.
final class TemporaryDirectory: Sendable {
    let path: String

    /// Creates `/tmp/outbox-itest-XXXXXX`.
    init() throws {
        var template = Array((NSTemporaryDirectory() + "/outbox-itest-XXXXXX").utf8CString)
        let created: String? = template.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return nil }
            return String(cString: result)
        }
        guard let created else {
            throw HarnessError("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = created
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// `path/name`.
    func file(_ name: String) -> String {
        path + "/" + name
    }

    /// Writes `text` to `path/name` and returns the full path.
    @discardableResult
    func write(_ text: String, to name: String) throws -> String {
        try write(Array(text.utf8), to: name)
    }

    /// Writes `bytes` to `path/name` and returns the full path.
    @discardableResult
    func write(_ bytes: [UInt8], to name: String) throws -> String {
        let target = file(name)
        // Close-on-exec: a child spawned meanwhile by another test must not inherit the
        // descriptor, or exec(2) of this file (a test script) fails with ETXTBSY.
        let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw HarnessError("cannot create \(target): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw HarnessError("cannot write \(target): \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
        return target
    }
}
