import Glibc

/// A file in `dataDirectory` that holds a request body beyond `limits.bodyMemoryBytes`
/// (nginx's `client_body_temp_path`): the proxy writes it as the body arrives, and the
/// forward, the fingerprint and the record encoder read it back at offsets, in pieces.
///
/// It is created with mode 0600 and unlinked at once, so it has no name while it is used and
/// its blocks are freed when the last holder lets go of the descriptor (``deinit``): an
/// exchange that ends in any way, or a crash, leaves nothing behind, except in the instant
/// between `mkstemp` and `unlink`, whose leftovers ``removeLeftovers(in:)`` deletes at start.
///
/// Immutable (only the descriptor), so it is `Sendable`: its one writer (the exchange, on its
/// loop) writes at offsets it tracks itself, and readers `pread`, which needs no shared
/// position. Reads may happen on another thread (the log's appender) only after the writer
/// has stopped writing (the body is complete when it is stored).
package final class SpillFile: Sendable {
    /// Every spill file's name starts so; nothing else in the data directory does.
    package static let namePrefix = "spill-"

    package let fd: Int32
    /// Where it was made, for log lines.
    package let directory: String

    private init(fd: Int32, directory: String) {
        self.fd = fd
        self.directory = directory
    }

    deinit {
        close(fd)
    }

    /// A failed system call and its errno.
    package struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        package let operation: String
        package let code: Int32

        package init(_ operation: String, _ code: Int32) {
            self.operation = operation
            self.code = code
        }

        package var description: String { "\(operation): \(String(cString: strerror(code)))" }
    }

    /// Creates an empty spill file in `directory` (mode 0600, close-on-exec) and unlinks it.
    package static func create(in directory: String) -> Result<SpillFile, Failure> {
        var template = Array((directory + "/" + namePrefix + "XXXXXX").utf8CString)
        // mkstemp: O_EXCL with a fresh name and mode 0600 (POSIX.1-2008). Glibc's module has no
        // mkostemp; Outbox starts no child processes, so close-on-exec set just after is enough.
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return .failure(Failure("create a spill file in \(directory)", errno)) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let unlinked = template.withUnsafeBufferPointer { unlink($0.baseAddress!) }
        if unlinked != 0 {
            let code = errno
            close(fd)
            return .failure(Failure("unlink a spill file in \(directory)", code))
        }
        return .success(SpillFile(fd: fd, directory: directory))
    }

    /// Writes all of `bytes` at `offset`.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Failure? {
        guard let base = bytes.baseAddress else { return nil }
        return transfer(bytes.count, "write a spill file") { done in pwrite(fd, base + done, bytes.count - done, off_t(offset + done)) }
    }

    /// Fills all of `buffer` from `offset`; a file that ends before is a failure (`EIO`).
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Failure? {
        guard let base = buffer.baseAddress else { return nil }
        return transfer(buffer.count, "read a spill file") { done in pread(fd, base + done, buffer.count - done, off_t(offset + done)) }
    }

    /// Repeats `call` (a `pread` or `pwrite` of what is left after `done` bytes) until `count`
    /// bytes are through: interrupted calls are retried, and a call that moves nothing means
    /// the file ended early.
    private func transfer(_ count: Int, _ operation: String, _ call: (_ done: Int) -> Int) -> Failure? {
        var done = 0
        while done < count {
            let moved = call(done)
            if moved < 0 {
                if errno == EINTR { continue }
                return Failure(operation, errno)
            }
            if moved == 0 { return Failure(operation + " (it ended early)", EIO) }
            done += moved
        }
        return nil
    }

    /// Deletes the spill files a crash left in `directory` (between create and unlink); returns
    /// how many. Nothing else in the directory is touched.
    @discardableResult
    package static func removeLeftovers(in directory: String) -> Int {
        guard let dir = opendir(directory) else { return 0 }
        defer { closedir(dir) }
        var removed = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix(namePrefix), name.count == namePrefix.count + 6 else { continue }
            if unlink(directory + "/" + name) == 0 { removed += 1 }
        }
        return removed
    }
}

/// A request body kept in a ``SpillFile``: its first `count` bytes. What an
/// ``OperationRequest`` carries instead of the bytes when the body was spilled.
package struct SpilledBody: Sendable, Equatable {
    package let file: SpillFile
    package let count: Int

    package init(file: SpillFile, count: Int) {
        self.file = file
        self.count = count
    }

    /// The same file and length: one spilled body is equal only to itself.
    package static func == (lhs: SpilledBody, rhs: SpilledBody) -> Bool {
        lhs.file === rhs.file && lhs.count == rhs.count
    }

    /// Reads the whole body into one array: only for the rare reader that needs it so (an
    /// admin request's JSON), never on the way to the log.
    package func bytes() -> Result<[UInt8], SpillFile.Failure> {
        var failure: SpillFile.Failure?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            failure = file.read(into: UnsafeMutableRawBufferPointer(buffer), at: 0)
            initialized = failure == nil ? count : 0
        }
        if let failure { return .failure(failure) }
        return .success(bytes)
    }
}
