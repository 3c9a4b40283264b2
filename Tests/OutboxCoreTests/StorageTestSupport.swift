import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
@testable import OutboxTelemetry
import Synchronization

/// A fresh directory for one storage test, removed with its content on deinit.
final class StorageTestDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "/outbox-storage-XXXXXX").utf8CString)
        let created: String? = template.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return nil }
            return String(cString: result)
        }
        guard let created else { throw StorageTestFailure("mkdtemp failed") }
        path = created
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The log's own directory inside the temp dir (so that `open` creates it).
    var logPath: String { path + "/log" }

    func segmentPath(_ segment: Int, generation: Int = 0) -> String {
        logPath + "/" + SegmentName(segment: UInt32(segment), generation: UInt32(generation)).fileName
    }

    func bytes(of file: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: file) else { throw StorageTestFailure("cannot read \(file)") }
        return [UInt8](data)
    }

    func write(_ bytes: [UInt8], to file: String) throws {
        guard FileManager.default.createFile(atPath: file, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
            throw StorageTestFailure("cannot write \(file)")
        }
    }

    func fileNames() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: logPath).sorted()
    }
}

struct StorageTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Collects log lines so tests can assert on `storage_truncated` and friends.
final class StorageLogLines: Sendable {
    private let lines = Mutex<[String]>([])

    var logger: Logger {
        Logger(level: .debug, clock: { 0 }, sink: { [self] line in self.lines.withLock { $0.append(line) } })
    }

    var all: [String] { lines.withLock { $0 } }

    func containing(_ text: String) -> [String] { all.filter { $0.contains(text) } }
}

enum StorageSamples {
    static let origin = Origin(scheme: .http, host: "api.example.test", port: 8080)

    /// A request whose body is `bodySize` bytes derived from `index`, so every record differs.
    static func request(_ index: Int, bodySize: Int = 64) -> OperationRequest {
        let body = (0..<bodySize).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
        return OperationRequest(
            id: UUID(), origin: origin, method: "POST", target: "/v1/items/\(index)",
            headers: [("Host", "api.example.test:8080"), ("Content-Type", "application/json"), ("X-Index", String(index))],
            body: body, idempotencyKey: "key-\(index)", fingerprint: [UInt8](repeating: UInt8(index & 0xFF), count: 32),
            priority: .normal, tag: nil, dependsOn: nil, createdAt: 1_700_000_000_000 + Int64(index))
    }

    static func open(_ directory: StorageTestDirectory, options: OperationLog.Options = .init(),
                     lines: StorageLogLines = StorageLogLines()) throws -> (OperationLog, [RecoveredOperation]) {
        try OperationLog.open(directory: directory.logPath, options: options, logger: lines.logger)
    }

    /// Appends `count` created records one by one; returns requests and their locations.
    static func fill(_ log: OperationLog, count: Int, bodySize: Int = 64) async throws -> [(OperationRequest, RecordLocation)] {
        var written: [(OperationRequest, RecordLocation)] = []
        for index in 0..<count {
            let request = request(index, bodySize: bodySize)
            written.append((request, try await log.append(.created(request, OperationState()))))
        }
        return written
    }
}

/// A value shared between a test and the closures it hands to the log (a class, so escaping
/// closures can capture it).
final class StorageShared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        mutex.withLock { body(&$0) }
    }

    var value: Value { mutex.withLock { $0 } }
}

/// Segments in the version 1 format, as the code before the version 2 framing wrote them
/// (`docs/storage.md`, "Version 1"): header version 1, frames `length | crc32c | type | payload`
/// with the checksum over type + payload. The payloads are the same in both versions.
enum LegacySegments {
    /// The bytes of segment `number` holding `records`, and where each record's frame starts.
    static func segment(_ number: UInt32, generation: UInt32 = 0, records: [LogRecord]) -> (bytes: [UInt8], offsets: [Int]) {
        var bytes = SegmentHeader(segment: number, generation: generation, version: SegmentHeader.legacyVersion).encoded()
        var offsets: [Int] = []
        for record in records {
            offsets.append(bytes.count)
            bytes += frame(record)
        }
        return (bytes, offsets)
    }

    /// The version 1 frame of `record`.
    static func frame(_ record: LogRecord) -> [UInt8] {
        var current = [UInt8](repeating: 0, count: RecordCodec.frameSize(record))
        // No spilled body here, so nothing to read back that could fail.
        current.withUnsafeMutableBytes { frame in
            do { try RecordCodec.encode(record, into: frame) } catch { preconditionFailure("encoding a record in memory failed: \(error)") }
        }
        let body = [current[1]] + current[RecordFrame.headerSize...]
        var frame: [UInt8] = []
        withUnsafeBytes(of: UInt32(body.count).littleEndian) { frame += $0 }
        withUnsafeBytes(of: body.withUnsafeBytes { CRC32C.checksum($0) }.littleEndian) { frame += $0 }
        return frame + body
    }
}
