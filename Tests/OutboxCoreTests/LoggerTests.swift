import CSystem
import Dispatch
import Foundation
import Glibc
import OutboxTelemetry
import Synchronization
import Testing

/// Collects what a logger writes, from any thread.
final class LineCollector: Sendable {
    private let storage = Mutex<[String]>([])

    var lines: [String] { storage.withLock { $0 } }

    var sink: @Sendable (String) -> Void {
        { line in self.storage.withLock { $0.append(line) } }
    }
}

/// 2026-11-29T16:10:26.123Z in milliseconds since the epoch.
let sampleInstant: Int64 = 1_795_968_626_123

@Suite("Logger")
struct LoggerTests {
    @Test("a line is timestamp, level, event, then fields in the order given")
    func lineFormat() {
        let collector = LineCollector()
        let logger = Logger(level: .info, clock: { sampleInstant }, sink: collector.sink)
        logger.info("listening", ["address": "127.0.0.1:8080"])
        logger.warn("upstream.offline", ["origin": "http://127.0.0.1:9000", "error": "connection refused", "attempt": "3"])
        logger.error("shutdown")
        #expect(collector.lines == [
            "2026-11-29T16:10:26.123Z info listening address=127.0.0.1:8080",
            #"2026-11-29T16:10:26.123Z warn upstream.offline origin=http://127.0.0.1:9000 error="connection refused" attempt=3"#,
            "2026-11-29T16:10:26.123Z error shutdown",
        ])
    }

    @Test("timestamps are UTC with zero-padded fields and truncated milliseconds", arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (Int64(951_782_400_005), "2000-02-29T00:00:00.005Z"),
        (Int64(-1), "1969-12-31T23:59:59.999Z"),
        (Int64(253_402_300_799_999), "9999-12-31T23:59:59.999Z"),
    ])
    func timestamps(milliseconds: Int64, expected: String) {
        let collector = LineCollector()
        Logger(level: .debug, clock: { milliseconds }, sink: collector.sink).debug("tick")
        #expect(collector.lines == ["\(expected) debug tick"])
    }

    @Test("values are bare when unambiguous, else quoted with JSON-like escapes", arguments: [
        ("plain", "plain"),
        ("/v1/items?x=1", #""/v1/items?x=1""#),
        ("", #""""#),
        ("two words", #""two words""#),
        (#"say "hi""#, #""say \"hi\"""#),
        (#"C:\dir"#, #""C:\\dir""#),
        ("line\nbreak\r\ttab", #""line\nbreak\r\ttab""#),
        ("bell\u{07}esc\u{1B}del\u{7F}", #""bell\u0007esc\u001bdel\u007f""#),
        ("c1\u{85}sep\u{2028}", #""c1\u0085sep\u2028""#),
        ("nbsp\u{A0}x", "\"nbsp\u{A0}x\""),
        ("déjà-vu_😀", "déjà-vu_😀"),
    ])
    func valueQuoting(value: String, written: String) {
        let collector = LineCollector()
        Logger(level: .info, clock: { 0 }, sink: collector.sink).info("e", ["k": value])
        #expect(collector.lines == ["1970-01-01T00:00:00.000Z info e k=\(written)"])
    }

    @Test("unsafe characters in event names and keys become underscores, so fields never shift")
    func eventAndKeySanitised() {
        let collector = LineCollector()
        Logger(level: .info, clock: { 0 }, sink: collector.sink).info("bad event\n", ["a key=": "v", "": "w"])
        #expect(collector.lines == ["1970-01-01T00:00:00.000Z info bad_event_ a_key_=v _=w"])
    }

    @Test("repeated keys are all written, in order")
    func repeatedKeysKept() {
        let collector = LineCollector()
        Logger(level: .info, clock: { 0 }, sink: collector.sink).info("e", ["k": "1", "k": "2"])
        #expect(collector.lines == ["1970-01-01T00:00:00.000Z info e k=1 k=2"])
    }

    @Test("a logger writes its level and the more severe ones", arguments: LogLevel.allCases)
    func levelFiltering(threshold: LogLevel) {
        let collector = LineCollector()
        let logger = Logger(level: threshold, clock: { 0 }, sink: collector.sink)
        logger.debug("d")
        logger.info("i")
        logger.warn("w")
        logger.error("e")
        let expected = LogLevel.allCases.filter { $0 >= threshold }
        #expect(collector.lines.map { $0.split(separator: " ")[1] } == expected.map { Substring($0.rawValue) })
        for level in LogLevel.allCases {
            #expect(logger.isEnabled(level) == (level >= threshold))
        }
        #expect(logger.level == threshold)
    }

    @Test("levels order debug < info < warn < error")
    func levelOrder() {
        #expect(LogLevel.allCases == [.debug, .info, .warn, .error])
        #expect(LogLevel.debug < .info && LogLevel.info < .warn && LogLevel.warn < .error)
        #expect(!(LogLevel.error < .error))
    }

    @Test("a disabled event reads no clock and reaches no sink")
    func disabledIsCheap() {
        let clockReads = Mutex(0)
        let collector = LineCollector()
        let logger = Logger(level: .warn, clock: { clockReads.withLock { $0 += 1 }; return 0 }, sink: collector.sink)
        logger.debug("skipped", ["k": "v"])
        logger.info("skipped")
        #expect(clockReads.withLock { $0 } == 0)
        #expect(collector.lines.isEmpty)
        logger.warn("kept")
        #expect(clockReads.withLock { $0 } == 1)
    }

    @Test("lines written from many threads to one pipe never interleave, even past PIPE_BUF")
    func concurrentLinesStayWhole() throws {
        var fds: [Int32] = [0, 0]
        // Close-on-exec: a child spawned meanwhile by another test would otherwise inherit
        // the write end and hold the pipe open past close(writeEnd).
        try #require(csystem_pipe2(&fds, O_CLOEXEC) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        let received = Mutex<[UInt8]>([])
        let readerDone = DispatchSemaphore(value: 0)
        Thread {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                received.withLock { $0.append(contentsOf: chunk[0..<count]) }
            }
            readerDone.signal()
        }.start()

        let workers = 8
        let linesPerWorker = 40
        let padding = 20_000
        let logger = Logger(level: .info, clock: { 0 }, sink: Logger.fileDescriptorSink(writeEnd))
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let pad = String(repeating: Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(worker))), count: padding)
            for number in 0..<linesPerWorker {
                logger.info("burst", ["worker": String(worker), "n": String(number), "pad": pad])
            }
        }
        close(writeEnd)
        let finished = readerDone.wait(timeout: .now() + 30) == .success
        close(readEnd)
        try #require(finished, "the reader did not see end of file")

        let text = String(decoding: received.withLock { $0 }, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == workers * linesPerWorker + 1)
        #expect(lines.last == "")
        var seen = Set<String>()
        for line in lines.dropLast() {
            let fields = line.split(separator: " ")
            guard fields.count == 6, let worker = Int(fields[3].dropFirst("worker=".count)) else {
                Issue.record("malformed line starting \(line.prefix(80))")
                continue
            }
            let pad = String(repeating: Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(worker))), count: padding)
            #expect(fields[5] == "pad=\(pad)")
            seen.insert("\(fields[3]) \(fields[4])")
        }
        #expect(seen.count == workers * linesPerWorker)
    }
}
