import Glibc

/// A small file read whole (a config file, a PEM file) with plain syscalls, so that a failure
/// carries the OS's reason, and with a bound, so that a wrong path (`/dev/zero`) cannot eat
/// memory.
package enum SmallFile {
    package enum Failure: Error, Equatable, Sendable {
        /// `open` or `read` failed with this errno.
        case system(Int32)
        /// The file holds more than the bound.
        case tooLarge
    }

    /// The file's bytes, at most `limit` of them.
    package static func read(_ path: String, atMost limit: Int) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .system(errno) }
        defer { close(fd) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return contents }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system(errno)
            }
            contents.append(contentsOf: chunk[0..<count])
            guard contents.count <= limit else { throw .tooLarge }
        }
    }
}
