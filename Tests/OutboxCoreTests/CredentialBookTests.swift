import Foundation
import Glibc
import OutboxConfig
import OutboxCredentials
import OutboxHTTP
import OutboxModel
import OutboxTelemetry
import Synchronization
import Testing

/// Replay credentials (SPEC §10) with real files and real commands: values set by hand win over
/// a rule's source; a `from: "client"` rule learns the newest values a client sent and keeps them
/// across a restart in a 0600 file; a command is run once for many operations, with
/// `OUTBOX_ORIGIN`, until its answer expires or is refused, and each way it can fail (exit
/// status, timeout with a child of its own, garbage, a missing field) is one clear reason.
@Suite("Replay credentials: sources, precedence, the command")
struct CredentialBookTests {
    static let api = Origin(scheme: .https, host: "api.example.test", port: 443)
    static let logger = Logger(level: .error)

    static func temporaryDirectory() throws -> String {
        var template = Array("/tmp/outbox-credentials.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        return String(cString: made)
    }

    /// An executable script in `directory`, run without a shell by its `#!` line.
    static func script(_ body: String, in directory: String, name: String = "token") throws -> String {
        let path = directory + "/" + name
        // Written through a close-on-exec descriptor: a child another test spawns meanwhile must
        // not hold it open for writing, or running it fails with "Text file busy".
        let bytes = Array(("#!/bin/sh\n" + body + "\n").utf8)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
        guard fd >= 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { close(fd) }
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else { throw CocoaError(.fileWriteUnknown) }
        return path
    }

    static func rule(_ source: CredentialRule.Source, command: [String] = [], timeout: Double = 10) -> CredentialRule {
        CredentialRule(scope: .origin(api), originText: api.description, headers: ["authorization"], source: source,
                       command: command, timeoutSeconds: timeout)
    }

    @Test func aClientsNewestValueIsLearntKeptAcrossARestartAndSetByHandWins() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let changes = Mutex<[Origin]>([])
        let book = CredentialBook(rules: [Self.rule(.client)], directory: directory, logger: Self.logger)
        book.onChange { origin in changes.withLock { $0.append(origin) } }
        #expect(await book.answer(for: Self.api) == .none)
        book.learn(HTTPHeaders([("Authorization", "Bearer one"), ("X-Other", "kept out")]), origin: Self.api)
        book.learn(HTTPHeaders([("Authorization", "Bearer one")]), origin: Self.api)
        book.learn(HTTPHeaders([("Authorization", "Bearer two")]), origin: Self.api)
        // Another origin has no rule: nothing is learnt for it.
        book.learn(HTTPHeaders([("Authorization", "Bearer elsewhere")]), origin: Origin(scheme: .http, host: "other.test", port: 80))
        #expect(await book.answer(for: Self.api) == .headers([("authorization", "Bearer two")]))
        #expect(changes.withLock { $0 } == [Self.api, Self.api], "a repeated value is no change")

        book.set([(name: "Authorization", value: "Bearer by-hand")], for: Self.api)
        #expect(await book.answer(for: Self.api) == .headers([("authorization", "Bearer by-hand")]))
        #expect(book.list().map(\.source) == ["admin", "client"])
        #expect(book.clear(Self.api))
        #expect(await book.answer(for: Self.api) == .headers([("authorization", "Bearer two")]))

        // The file is written off the caller's thread: look until it holds the newest value.
        let path = directory + "/credentials.json"
        var text = ""
        for _ in 0..<500 where !text.contains("Bearer two") {
            text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if !text.contains("Bearer two") { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(text.contains("Bearer two"), "\(text)")
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let restarted = CredentialBook(rules: [Self.rule(.client)], directory: directory, logger: Self.logger)
        #expect(await restarted.answer(for: Self.api) == .headers([("authorization", "Bearer two")]))
    }

    /// Each connection remembers what it taught last, so its repeated value costs no lock; a
    /// value another connection taught since still loses to this connection's newer request.
    @Test func aConnectionsRepeatedValueIsNoNews_ButItsNextRequestIsNewerThanAnotherConnections() async throws {
        let changes = Mutex<[Origin]>([])
        let book = CredentialBook(rules: [Self.rule(.client)], directory: nil, logger: Self.logger)
        book.onChange { origin in changes.withLock { $0.append(origin) } }
        var first = CredentialBook.LearningMemo()
        var second = CredentialBook.LearningMemo()
        let one = HTTPHeaders([("Authorization", "Bearer one")])
        book.learn(one, origin: Self.api, memo: &first)
        book.learn(one, origin: Self.api, memo: &first)
        book.learn(HTTPHeaders([("Accept", "*/*")]), origin: Self.api, memo: &first)
        #expect(changes.withLock { $0.count } == 1)
        book.learn(HTTPHeaders([("Authorization", "Bearer two")]), origin: Self.api, memo: &second)
        #expect(await book.answer(for: Self.api) == .headers([("authorization", "Bearer two")]))
        book.learn(one, origin: Self.api, memo: &first)
        #expect(await book.answer(for: Self.api) == .headers([("authorization", "Bearer one")]), "the newest request's value wins")
        #expect(changes.withLock { $0.count } == 3)
        // An origin no rule covers is remembered as such.
        let other = Origin(scheme: .http, host: "other.test", port: 80)
        book.learn(one, origin: other, memo: &first)
        book.learn(HTTPHeaders([("Authorization", "Bearer x")]), origin: other, memo: &first)
        #expect(book.list().count == 1)
    }

    @Test func aCommandRunsOnceForManyAsksUntilRefused_WithItsOriginInItsEnvironment() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let runs = directory + "/runs"
        let command = try Self.script("""
            echo run >> \(runs)
            sleep 0.2
            printf '{"headers": {"Authorization": "Bearer for %s"}, "expiresAt": "2999-01-01T00:00:00Z"}' "$OUTBOX_ORIGIN"
            """, in: directory)
        let book = CredentialBook(rules: [Self.rule(.command, command: [command])], directory: nil, logger: Self.logger)
        let answers = await withTaskGroup(of: CredentialAnswer.self) { group in
            for _ in 0..<5 { group.addTask { await book.answer(for: Self.api) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0 == .headers([("authorization", "Bearer for https://api.example.test")]) }, "\(answers)")
        #expect(try String(contentsOfFile: runs, encoding: .utf8) == "run\n", "one run for five asks at once")
        #expect(await book.answer(for: Self.api) != .none)
        #expect(try String(contentsOfFile: runs, encoding: .utf8) == "run\n", "cached until it expires")
        book.refused(Self.api)
        #expect(await book.answer(for: Self.api) != .none)
        #expect(try String(contentsOfFile: runs, encoding: .utf8) == "run\nrun\n", "refused: asked again")
        #expect(book.list().first?.source == "command")
    }

    @Test(arguments: [
        ("exit 1", "the command exited with status 1"),
        ("echo not json", "the command's stdout is not a JSON object"),
        (#"echo '{"headers": "Bearer x"}'"#, "headers: expected an object of header names and string values"),
        (#"echo '{"headers": {"Authorization": 5}}'"#, "headers.Authorization: expected a string without line breaks"),
        (#"echo '{"headers": {"Authorization": "a"}, "expiresAt": "tomorrow"}'"#, "expiresAt: expected an RFC 3339 time"),
        (#"echo '{"headers": {"X-Other": "a"}}'"#, "the command's headers hold none of authorization"),
    ])
    func aFailingCommandGivesOneClearReasonAndNoValue(body: String, reason: String) async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let book = CredentialBook(rules: [Self.rule(.command, command: [try Self.script(body, in: directory)])], directory: nil,
                                  logger: Self.logger)
        let first = await book.answer(for: Self.api)
        #expect(first == .failed(reason: reason, failures: 1), "\(first)")
        let second = await book.answer(for: Self.api)
        #expect(second == .failed(reason: reason, failures: 2), "failures in a row grow the backoff: \(second)")
    }

    @Test func aHangingCommandIsKilledWithItsChildrenAtItsTimeout() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pidFile = directory + "/child"
        // A child of its own that would outlive it: the whole process group goes.
        let command = try Self.script("sleep 60 & echo $! > \(pidFile); wait", in: directory)
        let book = CredentialBook(rules: [Self.rule(.command, command: [command], timeout: 0.5)], directory: nil, logger: Self.logger)
        let started = ContinuousClock.now
        #expect(await book.answer(for: Self.api) == .failed(reason: "the command did not finish within 0.5 s (killed)", failures: 1))
        #expect(ContinuousClock.now - started < .seconds(5))
        let child = pid_t(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(child > 0)
        var gone = false
        for _ in 0..<500 where !gone {
            // Gone, or a zombie nobody reaps (its parent, the script, is gone too).
            let state = (try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8))?.split(separator: " ").dropFirst(2).first
            gone = state == nil || state == "Z"
            if !gone { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(gone, "the command's child \(child) outlived the timeout")
    }
}
