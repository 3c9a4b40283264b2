import Foundation
import OutboxModel
import Testing

/// `https://` upstreams, on the same path as `http://` ones: the real binary with `--upstream
/// https://127.0.0.1:PORT` against a Python HTTPS origin (`Tests/Scripts/tls_upstream.py`)
/// whose certificate is signed by the loopback-only test CA. URLSession on Linux trusts only
/// the system store, so the tests that talk TLS run where `Tests/Scripts/install-test-ca.sh`
/// has run (CI) and are skipped elsewhere, saying why.
@Suite("HTTPS upstream (URLSession transport)", .harnessThreads)
struct SecureUpstreamTests {
    /// What `GET /big` serves: the origin's SplitMix64 stream (`BIG_BODY_*` in the script).
    static let bigBody = GeneratedBody(count: 2 * 1024 * 1024, seed: 0x5EC0_DE0F_B16B_0D1E)

    @Test(.needsHTTPSTestOrigin) func getThroughHttpsUpstreamReturnsTheOriginsAnswerWithVia() async throws {
        let origin = try await HTTPSOrigin.start()
        let outbox = try await OutboxProcess.start(upstream: origin.baseURL)
        let response = try outbox.exchange("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(outbox)\n\(origin)")
        #expect(response.bodyText == "secure hello")
        #expect(response.headers.values("Via") == ["1.1 outbox"], "\(response)")
        #expect(try await origin.waitForRequestLines(1) == ["GET /hello"], "\(origin)")
    }

    @Test(.needsHTTPSTestOrigin) func postBodyAndCustomHeaderArriveAtHttpsOrigin() async throws {
        let origin = try await HTTPSOrigin.start()
        let outbox = try await OutboxProcess.start(upstream: origin.baseURL)
        // Every byte value, so a text conversion anywhere on the way would show.
        let payload = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ $0 >> 9) }
        let client = try outbox.connect()
        try client.send(Array(("POST /echo HTTP/1.1\r\nHost: h\r\nX-Outbox-Test: value 42\r\n"
            + "Content-Type: application/octet-stream\r\nContent-Length: \(payload.count)\r\n\r\n").utf8) + payload)
        let response = try client.readResponse(to: "POST", timeout: .seconds(20))
        #expect(response.status == 201, "\(response)\n\(outbox)\n\(origin)")

        let echo = try Echo(response.body)
        #expect(echo.requestLine == "POST /echo")
        #expect(echo.headers.values("X-Outbox-Test") == ["value 42"], "origin got:\n\(echo.headers)")
        #expect(echo.headers.values("Host") == [origin.authority], "origin got:\n\(echo.headers)")
        #expect(echo.headers.values("Via") == ["1.1 outbox"], "origin got:\n\(echo.headers)")
        #expect(echo.body.count == payload.count)
        #expect(SHA256.hex(of: echo.body) == SHA256.hex(of: payload), "the body changed on the way")
    }

    @Test(.needsHTTPSTestOrigin) func redirectIsPassedToTheClientNotFollowed() async throws {
        let origin = try await HTTPSOrigin.start()
        let outbox = try await OutboxProcess.start(upstream: origin.baseURL)
        let response = try outbox.exchange("GET /redirect HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 302, "\(response)\n\(outbox)\n\(origin)")
        #expect(response.headers.values("Location") == ["/hello"], "\(response)")
        #expect(response.bodyText == "see /hello")
        // A followed redirect would have reached the origin before the response came back.
        #expect(try await origin.waitForRequestLines(1) == ["GET /redirect"], "\(origin)")
    }

    @Test(.needsHTTPSTestOrigin) func setCookieReachesTheClientAndIsNeverSentBackByTheProxy() async throws {
        let origin = try await HTTPSOrigin.start()
        let outbox = try await OutboxProcess.start(upstream: origin.baseURL)
        let client = try outbox.connect()
        try client.send("GET /set-cookie HTTP/1.1\r\nHost: h\r\n\r\n")
        let setCookie = try client.readResponse(timeout: .seconds(20))
        #expect(setCookie.status == 200, "\(setCookie)\n\(outbox)\n\(origin)")
        #expect(setCookie.headers.values("Set-Cookie") == ["s=1"], "\(setCookie)")

        // Same client connection, then a new one: a cookie jar in the proxy would show in either.
        try client.send("GET /cookie HTTP/1.1\r\nHost: h\r\n\r\n")
        let sameConnection = try client.readResponse(timeout: .seconds(20))
        #expect(sameConnection.status == 200, "\(sameConnection)\n\(outbox)")
        #expect(sameConnection.bodyText == "none", "the proxy sent a cookie it stored")
        let newConnection = try outbox.exchange("GET /cookie HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(newConnection.bodyText == "none", "the proxy sent a cookie it stored")

        // The client's own cookies are the client's business: they pass through.
        let own = try outbox.exchange("GET /cookie HTTP/1.1\r\nHost: h\r\nCookie: c=2\r\n\r\n", timeout: .seconds(20))
        #expect(own.status == 200, "\(own)\n\(outbox)")
        #expect(own.bodyText == "c=2")
    }

    @Test(.needsHTTPSTestOrigin) func twoMebibyteBodyArrivesIntact() async throws {
        let origin = try await HTTPSOrigin.start()
        let outbox = try await OutboxProcess.start(upstream: origin.baseURL)
        let client = try outbox.connect()
        try client.send("GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
        let response = try client.readResponse(timeout: .seconds(30), body: .digestOnly)
        #expect(response.status == 200, "\(response)\n\(outbox)\n\(origin)")
        #expect(response.bodyByteCount == Self.bigBody.count)
        #expect(response.bodySHA256 == Self.bigBody.sha256Hex(), "the body changed on the way")
    }

    @Test func httpsOriginNotListeningGivesServiceUnavailableWithRetryAfter() async throws {
        let dead = try LocalPort.refusing()
        let outbox = try await OutboxProcess.start(upstream: "https://127.0.0.1:\(dead.port)")
        let response = try outbox.exchange("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(response, status: 503, from: outbox)
        let retryAfter = try #require(response.headers["Retry-After"], "503 without Retry-After\n\(response)")
        #expect(UInt(retryAfter) != nil || retryAfter.hasSuffix("GMT"), "Retry-After: \(retryAfter)")
    }

    /// The handshake fails before any byte of the request is sent, so the request was never
    /// sent: 503 with Retry-After, like any origin that can't be reached. (On Linux,
    /// FoundationNetworking reports every TLS failure as `URLError.unknown`; `classify`
    /// recognises them by their text.)
    @Test(.needsHTTPSTestOrigin) func originWithUntrustedCertificateNeverGetsTheRequestAndTheClientGetsAnError() async throws {
        let origin = try await HTTPSOrigin.start(certificate: "untrusted.pem", key: "untrusted-key.pem")
        let outbox = try await OutboxProcess.start(upstream: origin.baseURL)
        let response = try outbox.exchange("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(response, status: 503, from: outbox)
        #expect(response.headers["Retry-After"] != nil, "\(response)")
        #expect(response.errorEnvelope?.message.contains("certificate") == true, "\(response)")
        // The origin saw the TLS connection fail (so the proxy did try) and no request.
        try await origin.waitForFailedConnection()
        #expect(origin.requestLines.isEmpty, "\(origin)")
    }
}

/// Where the suite's files are and whether its TLS tests can run here. Outside the suite type
/// so that test traits can use it (a trait naming its own suite's members is a circular
/// reference for the `@Suite` macro).
enum SecureUpstreamFixtures {
    static let installedCA = "/usr/local/share/ca-certificates/outbox-test-loopback-ca.crt"
    static let testCAInstalled = FileManager.default.fileExists(atPath: installedCA)
    static let python = ChildProcess.which("python3")
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    static let originScript = testsDirectory.appendingPathComponent("Scripts/tls_upstream.py").path
    static let directory = testsDirectory.appendingPathComponent("Fixtures/tls")

    /// Why the HTTPS origin cannot be used here, or nil when it can.
    static let skipReason: String? = {
        if !testCAInstalled {
            return "the test CA is not trusted here: run Tests/Scripts/install-test-ca.sh (needs root) to enable"
        }
        return python == nil ? "python3 is not installed" : nil
    }()
}

extension Trait where Self == ConditionTrait {
    /// Skips a test that needs `tls_upstream.py` with a certificate the system trusts, naming
    /// what is missing.
    static var needsHTTPSTestOrigin: Self {
        .enabled(if: SecureUpstreamFixtures.skipReason == nil, Comment(rawValue: SecureUpstreamFixtures.skipReason ?? ""))
    }
}

extension SecureUpstreamTests {
    /// `tls_upstream.py` as a child process on 127.0.0.1:0. It prints `listening PORT` once it
    /// accepts connections and `request METHOD PATH` per request; killed with this object.
    final class HTTPSOrigin: Sendable, CustomStringConvertible {
        let child: ChildProcess
        let port: UInt16

        private init(child: ChildProcess, port: UInt16) {
            self.child = child
            self.port = port
        }

        /// Starts the origin with a certificate from `Tests/Fixtures/tls` and waits until it listens.
        static func start(certificate: String = "server.pem", key: String = "server-key.pem",
                          timeout: Duration = .seconds(20)) async throws -> HTTPSOrigin {
            try requireInstalledCAMatchesFixture()
            guard let python = SecureUpstreamFixtures.python else { throw HarnessError("python3 is not on PATH") }
            let child = try ChildProcess(executable: python, arguments: [
                SecureUpstreamFixtures.originScript,
                "--cert", SecureUpstreamFixtures.directory.appendingPathComponent(certificate).path,
                "--key", SecureUpstreamFixtures.directory.appendingPathComponent(key).path,
            ])
            let result: Result<UInt16, HarnessError> = try await child.observed.wait(
                timeout: timeout,
                describeTimeout: { observed in "tls_upstream.py printed no listening line; stderr:\n\(observed.stderrText.suffix(4000))" },
                until: { observed in
                    for line in observed.stdoutText.split(separator: "\n") where line.hasPrefix("listening ") {
                        if let port = UInt16(line.dropFirst("listening ".count)), port != 0 { return .success(port) }
                    }
                    if observed.stdoutClosed {
                        return .failure(HarnessError("tls_upstream.py ended before listening; stderr:\n\(observed.stderrText.suffix(4000))"))
                    }
                    return nil
                }
            )
            return HTTPSOrigin(child: child, port: try result.get())
        }

        /// A stale CA in the trust store (the fixtures were regenerated, the script not rerun)
        /// would fail every test with a TLS error; say what to do instead.
        private static func requireInstalledCAMatchesFixture() throws {
            let installed = FileManager.default.contents(atPath: SecureUpstreamFixtures.installedCA)
            let fixture = FileManager.default.contents(atPath: SecureUpstreamFixtures.directory.appendingPathComponent("ca.pem").path)
            guard let installed, installed == fixture else {
                throw HarnessError("\(SecureUpstreamFixtures.installedCA) is not Tests/Fixtures/tls/ca.pem: rerun Tests/Scripts/install-test-ca.sh")
            }
        }

        /// `host:port` as the proxy must send it in `Host`.
        var authority: String { "127.0.0.1:\(port)" }

        /// `https://127.0.0.1:PORT`.
        var baseURL: String { "https://\(authority)" }

        /// `METHOD PATH` of every request received so far, in order.
        var requestLines: [String] {
            Self.requestLines(in: child.observed.value)
        }

        /// Waits until at least `count` requests were reported, then returns all reported so
        /// far: the origin prints the line before it answers, but our pipe reader may lag.
        func waitForRequestLines(_ count: Int, timeout: Duration = .seconds(10)) async throws -> [String] {
            try await child.observed.wait(
                timeout: timeout,
                describeTimeout: { observed in "fewer than \(count) requests at the origin; stdout:\n\(observed.stdoutText.suffix(2000))" },
                until: { observed in
                    let lines = Self.requestLines(in: observed)
                    return lines.count >= count ? lines : nil
                }
            )
        }

        private static func requestLines(in observed: ChildProcess.Observed) -> [String] {
            // Only complete lines: the last piece may still be arriving.
            observed.stdoutText.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                .filter { $0.hasPrefix("request ") }.map { String($0.dropFirst("request ".count)) }
        }

        /// Waits until a client connection ended in an error (a failed handshake) on the origin.
        func waitForFailedConnection(timeout: Duration = .seconds(10)) async throws {
            try await child.observed.wait(
                timeout: timeout,
                describeTimeout: { observed in "no failed connection at the origin; stderr:\n\(observed.stderrText.suffix(4000))" },
                until: { observed in observed.stderrText.contains("tls_upstream: connection from") ? () : nil }
            )
        }

        var description: String {
            "tls_upstream.py pid \(child.pid) on port \(port); stdout:\n\(child.stdoutText.suffix(2000))\nstderr:\n\(child.stderrText.suffix(2000))"
        }
    }

    /// The `/echo` body: the request line, the headers as the origin received them, a blank
    /// line, the body bytes.
    struct Echo {
        let requestLine: String
        let headers: HTTPHeaders
        let body: [UInt8]

        init(_ bytes: [UInt8]) throws {
            let separator: [UInt8] = [0x0A, 0x0A]
            guard let end = bytes.indices.dropLast().first(where: { bytes[$0] == 0x0A && bytes[$0 + 1] == 0x0A }) else {
                throw HarnessError("echo body without a blank line: \(String(decoding: bytes.prefix(500), as: UTF8.self))")
            }
            let lines = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\n").map(String.init)
            requestLine = lines.first ?? ""
            headers = HTTPHeaders(lines.dropFirst().compactMap { line in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return HeaderField(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: " "))
            })
            body = Array(bytes[(end + separator.count)...])
        }
    }
}
