import Foundation
import Glibc

/// What a test can see of the proxy's data directory from outside: permission bits and the
/// regular files under it, found without knowing the storage layout (users rely only on
/// the modes and the crash behaviour, not on file names, so the layout may change).
enum DataDirectoryInspection {
    /// One regular file under the data directory.
    struct File: Sendable {
        let path: String
        let size: Int
        let mode: mode_t
        let modified: timespec
    }

    /// The permission bits (`0o777` part) of `path`, nil when it cannot be stat'ed.
    static func permissions(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o777
    }

    /// Every regular file below `root`, recursively.
    static func regularFiles(under root: String) -> [File] {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var files: [File] = []
        while let relative = walker.nextObject() as? String {
            let path = root + "/" + relative
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            files.append(File(path: path, size: Int(info.st_size), mode: info.st_mode & 0o777, modified: info.st_mtim))
        }
        return files
    }

    /// The non-empty regular file written last (ties broken by the greater path, as segment
    /// names usually count up): where the newest records, and so a torn tail, would be.
    static func newestNonEmptyFile(under root: String) -> File? {
        regularFiles(under: root).filter { $0.size > 0 }.max { a, b in
            if a.modified.tv_sec != b.modified.tv_sec { return a.modified.tv_sec < b.modified.tv_sec }
            if a.modified.tv_nsec != b.modified.tv_nsec { return a.modified.tv_nsec < b.modified.tv_nsec }
            return a.path < b.path
        }
    }

    /// Appends `bytes` to the file at `path`.
    static func append(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_APPEND)
        guard fd >= 0 else { throw HarnessError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw HarnessError("short write to \(path)") }
    }

    /// Cuts the last `count` bytes off the file at `path`.
    /// Cuts `count` bytes off the data at the end of `path`: off its last non-zero byte, since
    /// the live segment of a killed process ends in the zeros its writer wrote ahead.
    static func truncateTail(of path: String, by count: Int) throws {
        guard let bytes = FileManager.default.contents(atPath: path) else { throw HarnessError("cannot read \(path)") }
        let dataEnd = (bytes.lastIndex(where: { $0 != 0 }) ?? -1) + 1
        guard dataEnd >= count else { throw HarnessError("\(path) holds \(dataEnd) bytes of data, fewer than \(count)") }
        guard truncate(path, off_t(dataEnd - count)) == 0 else {
            throw HarnessError("cannot truncate \(path): \(String(cString: strerror(errno)))")
        }
    }
}
