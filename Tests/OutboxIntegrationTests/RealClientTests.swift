import Foundation
import OutboxModel
import TestPrerequisites
import Testing

/// Real clients through the real proxy: curl in proxy mode (`-x`) and base-URL mode, with and
/// without `Expect: 100-continue`, and Python's urllib with a ProxyHandler.
@Suite("Real clients: curl and Python urllib", .harnessThreads)
struct RealClientTests {
    static let curl = ChildProcess.which("curl")
    static let python = ChildProcess.which("python3")
    static let urllibScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scripts/urllib_client.py").path

    /// The upstream's answer: method, target and a digest of the body it got.
    static let reporter: TestUpstream.Handler = { request in
        .respond(.text("\(request.method) \(request.target) \(request.body.count) \(SHA256.hex(of: request.body))"))
    }

    /// Runs curl writing the body and headers to files; returns (status code, body, headers).
    static func runCurl(_ arguments: [String], in directory: TemporaryDirectory) async throws
        -> (status: Int, body: String, headers: String, stderr: String) {
        let curl = try #require(Self.curl)
        let result = try await ChildProcess.run(curl, [
            "-sS", "--max-time", "20", "-o", directory.file("body"), "-D", directory.file("headers"),
            "-w", "%{http_code}",
        ] + arguments)
        #expect(result.exit == .exited(0), "curl \(arguments): \(result.stderrText)")
        let body = (try? String(contentsOfFile: directory.file("body"), encoding: .utf8)) ?? ""
        let headers = (try? String(contentsOfFile: directory.file("headers"), encoding: .utf8)) ?? ""
        return (Int(result.stdoutText) ?? -1, body, headers, result.stderrText)
    }

    static func payload(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ $0 >> 9) }
    }

    @Test(.requires(curl != nil, "curl is not installed"))
    func curlThroughProxyFlagReachesTheOrigin() async throws {
        let configured = try TestUpstream()
        let origin = try TestUpstream(handler: Self.reporter)
        let outbox = try await OutboxProcess.start(upstream: configured.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["127.0.0.1"], "connectPorts": [443]}}
            """)
        let directory = try TemporaryDirectory()
        let result = try await Self.runCurl(["-x", outbox.baseURL, "\(origin.baseURL)/path?q=1"], in: directory)
        #expect(result.status == 200, "\(result)\n\(outbox)")
        #expect(result.body == "GET /path?q=1 0 \(SHA256.hex(of: []))")
        #expect(result.headers.lowercased().contains("via: 1.1 outbox"), "\(result.headers)")
        let request = try #require(try await origin.waitForRequests(1).first)
        #expect(request.headers["Host"] == origin.authority)
        #expect(!request.headers.contains("Proxy-Connection"))
        #expect(configured.receivedByteCount == 0)
    }

    @Test(.requires(curl != nil, "curl is not installed"))
    func curlAgainstTheBaseURLReachesTheUpstream() async throws {
        let upstream = try TestUpstream(handler: Self.reporter)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL + "/api")
        let directory = try TemporaryDirectory()
        let result = try await Self.runCurl(["\(outbox.baseURL)/path?q=2"], in: directory)
        #expect(result.status == 200, "\(result)\n\(outbox)")
        #expect(result.body == "GET /api/path?q=2 0 \(SHA256.hex(of: []))")
    }

    /// curl adds `Expect: 100-continue` to large bodies by itself; `-H 'Expect:'` removes it.
    @Test(.requires(curl != nil, "curl is not installed"),
          arguments: [[], ["-H", "Expect:"], ["-H", "Expect: 100-continue"]])
    func curlPostDataBinaryArrivesIntact(expectArguments: [String]) async throws {
        let upstream = try TestUpstream(handler: Self.reporter)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let directory = try TemporaryDirectory()
        let payload = Self.payload(1_500_000)
        let file = try directory.write(payload, to: "payload.bin")
        let result = try await Self.runCurl(expectArguments + [
            "-H", "Content-Type: application/octet-stream", "-H", "Idempotency-Key: curl-\(expectArguments.count)",
            "--data-binary", "@\(file)", "\(outbox.baseURL)/upload",
        ], in: directory)
        #expect(result.status == 200, "\(result)\n\(outbox)")
        #expect(result.body == "POST /upload \(payload.count) \(SHA256.hex(of: payload))", "\(outbox)")
    }

    @Test(.requires(curl != nil, "curl is not installed"))
    func curlPostThroughProxyFlagArrivesIntact() async throws {
        let configured = try TestUpstream()
        let origin = try TestUpstream(handler: Self.reporter)
        let outbox = try await OutboxProcess.start(upstream: configured.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [443]}}
            """)
        let directory = try TemporaryDirectory()
        let payload = Self.payload(40_000)
        let file = try directory.write(payload, to: "payload.bin")
        let result = try await Self.runCurl([
            "-x", outbox.baseURL, "-H", "Idempotency-Key: curl-fwd", "--data-binary", "@\(file)", "\(origin.baseURL)/items",
        ], in: directory)
        #expect(result.status == 200, "\(result)\n\(outbox)")
        #expect(result.body == "POST /items \(payload.count) \(SHA256.hex(of: payload))")
    }

    @Test(.requires(python != nil, "python3 is not installed"))
    func pythonUrllibGetAndPostThroughProxyHandler() async throws {
        let python = try #require(Self.python)
        let configured = try TestUpstream()
        let origin = try TestUpstream(handler: Self.reporter)
        let outbox = try await OutboxProcess.start(upstream: configured.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["127.0.0.1"], "connectPorts": [443]}}
            """)
        let directory = try TemporaryDirectory()
        let payload = Self.payload(70_000)
        let file = try directory.write(payload, to: "payload.bin")

        let get = try await ChildProcess.run("/usr/bin/env", [
            python, Self.urllibScript, "--proxy", outbox.baseURL, "--url", "\(origin.baseURL)/py/get?x=1",
        ])
        let getResult = try Self.decodeScriptOutput(get, outbox: outbox)
        #expect(getResult.status == 200)
        #expect(getResult.body == "GET /py/get?x=1 0 \(SHA256.hex(of: []))")
        #expect(getResult.headers.contains { $0.lowercased() == "via: 1.1 outbox" }, "\(getResult.headers)")

        let post = try await ChildProcess.run("/usr/bin/env", [
            python, Self.urllibScript, "--proxy", outbox.baseURL, "--url", "\(origin.baseURL)/py/post",
            "--method", "POST", "--data-file", file, "--header", "Content-Type: application/octet-stream",
            "--header", "Idempotency-Key: py-1",
        ])
        let postResult = try Self.decodeScriptOutput(post, outbox: outbox)
        #expect(postResult.status == 200)
        #expect(postResult.body == "POST /py/post \(payload.count) \(SHA256.hex(of: payload))")
        let requests = try await origin.waitForRequests(2)
        #expect(requests.map(\.method) == ["GET", "POST"])
        #expect(configured.receivedByteCount == 0)
    }

    static func decodeScriptOutput(_ run: ChildProcess.Observed, outbox: OutboxProcess) throws
        -> (status: Int, body: String, headers: [String]) {
        try #require(run.exit == .exited(0), "urllib_client.py: \(run.stderrText)\n\(outbox)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any], "\(run.stdoutText)")
        let status = try #require(object["status"] as? Int)
        let body = try #require(Data(base64Encoded: object["bodyBase64"] as? String ?? ""))
        let headers = (object["headers"] as? [[String]] ?? []).map { $0.joined(separator: ": ") }
        return (status, String(decoding: body, as: UTF8.self), headers)
    }
}
