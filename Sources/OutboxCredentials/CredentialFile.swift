import Dispatch
import Foundation
import Glibc
import OutboxModel
import OutboxTelemetry
import Synchronization

/// The values learnt from clients (`from: "client"`, SPEC §10), kept across restarts in
/// `dataDirectory/credentials.json`, mode 0600:
///
///     {"origins": [{"origin": "https://api.example.com", "headers": [["authorization", "Bearer …"]]}]}
///
/// Written crash-safe, as the interception CA is: a temporary file written and fsync'd, renamed
/// over the old one, the directory fsync'd; a crash leaves the old file or the new, never half
/// of one. Writes run on a queue of their own (never an event loop), the newest values
/// replacing any write not started yet.
final class CredentialFile: Sendable {
    static let name = "credentials.json"
    /// Larger files are not read: a few origins' headers fit in far less.
    static let maxBytes = 1 << 20

    private let directory: String
    private let logger: Logger
    private let queue = DispatchQueue(label: "outbox-credentials-file")
    private let next = Mutex<[Origin: [(name: String, value: String)]]?>(nil)

    init(directory: String, logger: Logger) {
        self.directory = directory
        self.logger = logger
    }

    var path: String { directory + "/" + Self.name }

    /// The values kept, or none when there is no file; an unreadable one is logged (without its
    /// contents) and ignored: clients teach the values again.
    func load() -> [Origin: [(name: String, value: String)]]? {
        let bytes: [UInt8]
        do {
            bytes = try SmallFile.read(path, atMost: Self.maxBytes)
        } catch {
            if case .system(ENOENT) = error { return nil }
            logger.warn("credentials_file_unreadable", ["path": path, "error": "\(error)"])
            return nil
        }
        guard let document = try? JSONReader.parse(bytes), let entries = document["origins"]?.arrayValue else {
            logger.warn("credentials_file_unreadable", ["path": path, "error": "not the JSON Outbox writes"])
            return nil
        }
        var learnt: [Origin: [(name: String, value: String)]] = [:]
        for entry in entries {
            guard let text = entry["origin"]?.stringValue, let origin = Origin.parseAbsolute(text + "/")?.0,
                  let pairs = entry["headers"]?.arrayValue else { continue }
            learnt[origin] = pairs.compactMap { pair in
                guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue, let value = items[1].stringValue
                else { return nil }
                return (name, value)
            }
        }
        return learnt
    }

    /// Writes `learnt` soon, in place of whatever write has not started yet.
    func save(_ learnt: [Origin: [(name: String, value: String)]]) {
        let first = next.withLock { next -> Bool in
            defer { next = learnt }
            return next == nil
        }
        guard first else { return }
        queue.async { [self] in
            guard let values = next.withLock({ next -> [Origin: [(name: String, value: String)]]? in
                defer { next = nil }
                return next
            }) else { return }
            write(values)
        }
    }

    private func write(_ learnt: [Origin: [(name: String, value: String)]]) {
        let document = JSON.object([("origins", .array(learnt.sorted { $0.key.description < $1.key.description }.map { origin, headers in
            .object([("origin", .string(origin.description)),
                     ("headers", .array(headers.map { JSON.array([.string($0.name), .string($0.value)]) }))])
        }))])
        let bytes = Array(document.rendered().utf8)
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return fail("open \(temporary)") }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                Glibc.close(fd)
                return fail("write \(temporary)")
            }
            written += count
        }
        guard fsync(fd) == 0 else {
            Glibc.close(fd)
            return fail("fsync \(temporary)")
        }
        Glibc.close(fd)
        guard rename(temporary, path) == 0 else { return fail("rename to \(path)") }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            Glibc.close(directoryFD)
        }
    }

    private func fail(_ what: String) {
        logger.warn("credentials_file_not_written", ["error": "\(what): \(String(cString: strerror(errno)))"])
    }
}
