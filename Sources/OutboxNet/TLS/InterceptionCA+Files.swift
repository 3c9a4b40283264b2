import Glibc
import OutboxModel

/// The CA's files, read and written with plain syscalls so errors carry the OS's reason, and
/// written crash-safe: a temporary file with its final mode from `open` on (the key is never
/// readable by others, not for an instant), fsync'd, renamed over the old one, then the
/// directory fsync'd so the rename itself survives a power loss.
extension InterceptionCA {
    /// PEM files are small; the bound keeps a wrong path (`/dev/zero`) from eating memory.
    static let maxFileBytes = 1 << 20

    /// The whole file; nil when it does not exist and `missingIsNil` says that is fine.
    static func readFile(_ path: String, missingIsNil: Bool = false) throws(InterceptionCAError) -> [UInt8]? {
        do {
            return try SmallFile.read(path, atMost: maxFileBytes)
        } catch {
            switch error {
            case .system(ENOENT) where missingIsNil: return nil
            case .system(let code): throw .unreadable(file: path, reason: reason(code))
            case .tooLarge: throw .unreadable(file: path, reason: "larger than \(maxFileBytes) bytes")
            }
        }
    }

    /// Replaces `name` in the directory open as `directory` with `bytes`, mode `mode`.
    static func writeDurably(_ bytes: [UInt8], named name: String, in directory: LockedDirectory,
                             mode: mode_t) throws(InterceptionCAError) {
        let final = directory.path + "/" + name
        let temporary = directory.path + "/." + name + ".tmp"
        // A crash may have left one behind; O_EXCL below then proves this one is new.
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw .cannotWrite(path: temporary, reason: reason(errno)) }
        /// The error for the call that just failed, the temporary file gone.
        func failed(_ path: String) -> InterceptionCAError {
            let problem = reason(errno)
            unlink(temporary)
            return .cannotWrite(path: path, reason: problem)
        }
        // The umask may have taken bits away; the mode asked for is the one wanted (0644 for
        // the certificate). It only adds back what the umask removed, never more than `mode`.
        var offset = 0
        var written = fchmod(fd, mode) == 0 ? 0 : -1
        while written >= 0, offset < bytes.count {
            written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { written = 0 }
            offset += max(0, written)
        }
        guard written >= 0, fsync(fd) == 0 else {
            let error = failed(temporary)
            close(fd)
            throw error
        }
        guard close(fd) == 0 else { throw failed(temporary) }
        guard rename(temporary, final) == 0 else { throw failed(final) }
        try directory.sync()
    }

    /// Removes `name` (absent is fine) and makes the removal durable.
    static func removeDurably(named name: String, in directory: LockedDirectory) throws(InterceptionCAError) {
        let path = directory.path + "/" + name
        guard unlink(path) == 0 || errno == ENOENT else { throw .cannotWrite(path: path, reason: reason(errno)) }
        try directory.sync()
    }

    static func reason(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// The CA directory, created 0700 if missing, open and locked (`flock`) for as long as this
    /// value lives, so that a running `outbox` and an `outbox ca --force` never interleave
    /// their writes and pair one's key with the other's certificate.
    final class LockedDirectory {
        let path: String
        private let fd: Int32

        init(_ path: String) throws(InterceptionCAError) {
            self.path = path
            if mkdir(path, 0o700) == 0 {
                // mkdir's mode passes through the umask; the directory must be exactly 0700.
                guard chmod(path, 0o700) == 0 else { throw .cannotWrite(path: path, reason: InterceptionCA.reason(errno)) }
            } else if errno != EEXIST {
                throw .cannotWrite(path: path, reason: InterceptionCA.reason(errno))
            }
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { throw .cannotWrite(path: path, reason: InterceptionCA.reason(errno)) }
            while flock(fd, LOCK_EX) != 0 {
                guard errno == EINTR else {
                    let problem = InterceptionCA.reason(errno)
                    close(fd)
                    throw .cannotWrite(path: path, reason: "cannot lock: \(problem)")
                }
            }
            self.fd = fd
        }

        func sync() throws(InterceptionCAError) {
            guard fsync(fd) == 0 else { throw .cannotWrite(path: path, reason: InterceptionCA.reason(errno)) }
        }

        deinit {
            close(fd)  // releases the lock
        }
    }
}
