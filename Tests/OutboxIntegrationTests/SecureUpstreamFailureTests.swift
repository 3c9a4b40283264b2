import Testing

/// A failed handshake means the request was never sent: the https origin counts as
/// unreachable (a GET gets 503, a POST is stored and answered 202) and `/admin/status` tells
/// why in its `lastError`, `tls: <reason>`. Connect, handshake and response timeouts read
/// differently there.
@Suite("HTTPS upstream: refused handshakes and timeouts", .harnessThreads)
struct SecureUpstreamFailureTests {
    /// Probes every 0.1 s, so that a test waiting for the proxy's next attempt waits little.
    static let fastProbes = #""reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 2}"#

    /// Certificates the proxy must refuse, with OpenSSL's reason.
    enum RefusedCertificate: String, CaseIterable, Sendable, CustomStringConvertible {
        case untrusted
        case expired
        case wrongHost

        var identity: TLSFixtures.Identity {
            switch self {
            case .untrusted: .untrusted
            case .expired: .expired
            case .wrongHost: .wrongHost
            }
        }

        var reason: String {
            switch self {
            case .untrusted: "self-signed certificate"
            case .expired: "certificate has expired"
            case .wrongHost: "IP address mismatch"
            }
        }

        var description: String { rawValue }
    }

    @Test(arguments: RefusedCertificate.allCases)
    func refusedCertificateMakesTheOriginUnreachableUntilVerificationIsOff(_ refused: RefusedCertificate) async throws {
        let origin = try await ProxiedOrigin.start(presenting: [refused.identity], config: Self.fastProbes)
        let front = try #require(origin.front)
        let outbox = origin.outbox

        let read = try outbox.exchange("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(read, status: 503, from: outbox)
        #expect(read.headers["Retry-After"] != nil, "\(read)")
        #expect(read.errorEnvelope?.message.contains("certificate") == true, "\(read)")
        // The front saw the handshake fail (so the proxy did try), and no request got through.
        try await front.waitForFailedHandshake()

        let queued = try outbox.enqueue(body: "kept for later")
        let entry = try await outbox.waitForOriginStatus(front.baseURL) { entry in
            entry.bool("online") == false && entry.string("lastError")?.hasPrefix("tls: certificate verify failed") == true
        }
        #expect(entry.string("lastError")?.contains(refused.reason) == true, "\(entry)")

        // After one more attempt (a probe, or a replay) failed at the front, the write is
        // still waiting and nothing has reached the origin.
        try await front.waitForFailedHandshake(count: front.failedHandshakes.count + 1)
        let operation = try outbox.operation(queued.id)
        #expect(["pending", "inProgress"].contains(operation.string("status") ?? ""), "\(operation)")
        #expect(origin.backend.requests.isEmpty, "\(origin.diagnostics)")

        let unverified = try await OutboxProcess.start(
            upstream: front.baseURL, config: TLSFixtures.config(tls: #""verify": false"#))
        let answered = try unverified.exchange("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(answered.status == 200, "with verify false: \(answered)\n\(unverified)\n\(front)")
        #expect(origin.backend.requests.map(\.target) == ["/hello"], "\(origin.diagnostics)")
    }

    /// A captive portal accepts TCP and then fails the handshake: the probe of an https origin
    /// must include the handshake, or it would call such an origin online at every interval.
    @Test func probesOfAnOriginWhoseHandshakeFailsLeaveItOffline() async throws {
        let origin = try await ProxiedOrigin.start(presenting: [.untrusted], config: Self.fastProbes)
        let front = try #require(origin.front)
        let read = try origin.outbox.exchange("GET /portal HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(read, status: 503, from: origin.outbox)
        // Only an origin with stored work is probed.
        _ = try origin.outbox.enqueue(body: "for the probes")
        _ = try await origin.outbox.waitForOriginStatus(front.baseURL) { $0.bool("online") == false }
        // Three more connections: the probes. (An origin a probe had called online would get
        // no more of them.)
        try await front.waitForAccepted(front.acceptedConnections + 3)
        let status = try JSONObject(origin.outbox.admin("status"))
        let entry = try #require(status.objects("origins")?.first { $0.string("origin") == front.baseURL }, "\(status)")
        #expect(entry.bool("online") == false, "a probe called the origin online: \(entry)\n\(front)")
        #expect(entry.string("lastError")?.hasPrefix("tls: ") == true, "\(entry)")
        #expect(origin.backend.requests.isEmpty, "\(origin.diagnostics)")
    }

    /// With TLS 1.3 the client's handshake is complete before the server has judged its
    /// certificate; the refusal is an alert after it. A probe must wait for that answer, or it
    /// calls the origin online at every interval (and every replay attempt fails on it).
    @Test func originRequiringAClientCertificateIsUnreachableWithoutOne() async throws {
        let origin = try await ProxiedOrigin.start(clientCA: TLSFixtures.clientCAFile, config: Self.fastProbes)
        let front = try #require(origin.front)
        let read = try origin.outbox.exchange("GET /mtls HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(read, status: 503, from: origin.outbox)
        try await front.waitForFailedHandshake()
        // Only an origin with stored work is probed.
        _ = try origin.outbox.enqueue(body: "for the probes")
        _ = try await origin.outbox.waitForOriginStatus(front.baseURL) { $0.bool("online") == false }
        // Three more connections: the probes. (An origin a probe had called online would get
        // no more of them.)
        try await front.waitForAccepted(front.acceptedConnections + 3)
        let status = try JSONObject(origin.outbox.admin("status"))
        let entry = try #require(status.objects("origins")?.first { $0.string("origin") == front.baseURL }, "\(status)")
        #expect(entry.bool("online") == false, "a probe called the origin online: \(entry)\n\(front)")
        #expect(entry.string("lastError")?.hasPrefix("tls: ") == true, "\(entry)")
        #expect(origin.backend.requests.isEmpty, "\(origin.diagnostics)")
    }

    @Test func configuredClientCertificateIsPresented() async throws {
        let origin = try await ProxiedOrigin.start(clientCA: TLSFixtures.clientCAFile, tls: TLSFixtures.clientCertificateConfig) { _ in
            .respond(.text("hello, client"))
        }
        let response = try origin.outbox.exchange("GET /mtls HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")
        #expect(response.bodyText == "hello, client")
        let front = try #require(origin.front)
        try await front.waitForConnections(1)
        #expect(front.failedHandshakes == [], "\(origin.diagnostics)")
    }

    /// The front accepts the TCP connection and never answers the ClientHello.
    @Test func silentHandshakeIsAHandshakeTimeout() async throws {
        let front = try await TLSFront.startSilent()
        let outbox = try await OutboxProcess.start(upstream: front.baseURL, config: TLSFixtures.config(
            other: #""reachability": {"connectTimeoutSeconds": 0.5, "responseTimeoutSeconds": 5, "probeIntervalSeconds": 60}"#))
        let read = try outbox.exchange("GET /silent HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        // The request was never sent: unreachable, like a connect timeout (not a 504).
        expectErrorResponse(read, status: 503, from: outbox)
        // The proxy did connect: the timeout is the handshake's, not the connect's.
        try await front.waitForAccepted(1)
        let entry = try await outbox.waitForOriginStatus(front.baseURL) { $0.bool("online") == false }
        #expect(entry.string("lastError") == "tls: handshake timeout", "\(entry)")
    }

    /// The handshake succeeds, the request reaches the origin, the answer never comes.
    @Test func silentOriginAfterTheHandshakeIsAResponseTimeout() async throws {
        let never = Gate()
        let origin = try await ProxiedOrigin.start(
            config: #""reachability": {"connectTimeoutSeconds": 5, "responseTimeoutSeconds": 0.5, "probeIntervalSeconds": 60}"#
        ) { _ in .hold(until: never, then: .respond(.text("too late"))) }
        let read = try origin.outbox.exchange("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(read, status: 504, from: origin.outbox)
        let request = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(request.method == "GET" && request.target == "/slow", "the request was sent: \(request)")
        let entry = try await origin.outbox.waitForOriginStatus(origin.baseURL) { $0.bool("online") == false }
        #expect(entry.string("lastError") == "response timeout", "\(entry)")
        let front = try #require(origin.front)
        try await front.waitForConnections(1)
        #expect(front.connections == 1, "\(origin.diagnostics)")
    }

    /// A listener with a full accept queue: the SYN goes unanswered, so connecting times out.
    @Test func unansweredConnectIsAConnectTimeout() async throws {
        let port = try UnresponsivePort()
        let upstream = "https://127.0.0.1:\(port.port)"
        let outbox = try await OutboxProcess.start(upstream: upstream, config: TLSFixtures.config(
            other: #""reachability": {"connectTimeoutSeconds": 0.5, "responseTimeoutSeconds": 5, "probeIntervalSeconds": 60}"#))
        let read = try outbox.exchange("GET /nobody HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(read, status: 503, from: outbox)
        let entry = try await outbox.waitForOriginStatus(upstream) { $0.bool("online") == false }
        #expect(entry.string("lastError") == "connect failed: connect timeout", "\(entry)")
    }

    /// The warning about a refused certificate comes once per change of the origin's state,
    /// not once per request or probe: five GETs, a stored write and its probes against the
    /// untrusted origin log it once; after the origin recovered and failed again, once more.
    @Test func handshakeFailureIsLoggedOncePerChangeOfState() async throws {
        let origin = try await ProxiedOrigin.start(presenting: [.untrusted, .server], config: Self.fastProbes)
        let front = try #require(origin.front)
        let outbox = origin.outbox

        try await failFiveTimes(origin, front)
        try await Self.waitForRefusedCertificateWarnings(1, in: outbox)
        #expect(Self.refusedCertificateWarnings(in: outbox).count == 1,
                "warnings:\n\(Self.refusedCertificateWarnings(in: outbox).joined(separator: "\n"))\n\(outbox)")

        try await front.switchCertificate()
        _ = try await outbox.waitForOriginStatus(front.baseURL) { $0.bool("online") == true }
        let recovered = try outbox.exchange("GET /back HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(recovered.status == 200, "\(recovered)\n\(origin.diagnostics)")

        try await front.switchCertificate()
        try await failFiveTimes(origin, front)
        try await Self.waitForRefusedCertificateWarnings(2, in: outbox)
        #expect(Self.refusedCertificateWarnings(in: outbox).count == 2,
                "warnings:\n\(Self.refusedCertificateWarnings(in: outbox).joined(separator: "\n"))\n\(outbox)")
    }

    /// Five refused GETs (each tried: nothing is stored yet), then a write, stored, whose
    /// probes make two more failed attempts at the front, so that a warning logged per attempt
    /// would have shown by the time we count.
    private func failFiveTimes(_ origin: ProxiedOrigin, _ front: TLSFront) async throws {
        for index in 0..<5 {
            let read = try origin.outbox.exchange("GET /refused/\(index) HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
            expectErrorResponse(read, status: 503, from: origin.outbox)
        }
        _ = try origin.outbox.enqueue(body: "for the probes")
        _ = try await origin.outbox.waitForOriginStatus(front.baseURL) { entry in
            entry.bool("online") == false && entry.string("lastError")?.hasPrefix("tls: certificate verify failed") == true
        }
        try await front.waitForFailedHandshake(count: front.failedHandshakes.count + 2)
    }

    /// The proxy's `warn` and `error` lines about a refused certificate.
    static func refusedCertificateWarnings(in outbox: OutboxProcess) -> [String] {
        completeLines(outbox.stderrText).filter(isRefusedCertificateWarning)
    }

    private static func isRefusedCertificateWarning(_ line: String) -> Bool {
        ["warn", "error"].contains(logLevel(Substring(line))) && line.contains("certificate verify failed")
    }

    /// Until `count` such lines have been read (the harness reads stderr on its own thread, so
    /// a line written before a response may come after it); more are counted afterwards.
    static func waitForRefusedCertificateWarnings(_ count: Int, in outbox: OutboxProcess) async throws {
        try await outbox.waitForStderr("\(count) refused-certificate warnings") { lines in
            lines.filter(isRefusedCertificateWarning).count >= count
        }
    }

    /// A `tls` file the proxy cannot read, and the key the error must name.
    enum UnreadableFile: String, CaseIterable, Sendable, CustomStringConvertible {
        case caFileMissing
        case caFileIsADirectory
        case clientCertificateMissing
        case clientKeyMissing

        func tlsMembers(in directory: TemporaryDirectory) -> String {
            let missing = TLSFixtures.jsonString(directory.file("no-such-file.pem"))
            switch self {
            case .caFileMissing:
                return #""caFile": \#(missing)"#
            case .caFileIsADirectory:
                return #""caFile": \#(TLSFixtures.jsonString(directory.path))"#
            case .clientCertificateMissing:
                return #""clientCertificateFile": \#(missing), "clientKeyFile": \#(TLSFixtures.jsonString(TLSFixtures.Identity.client.keyPath))"#
            case .clientKeyMissing:
                return #""clientCertificateFile": \#(TLSFixtures.jsonString(TLSFixtures.Identity.client.certificatePath)), "clientKeyFile": \#(missing)"#
            }
        }

        var key: String {
            switch self {
            case .caFileMissing, .caFileIsADirectory: "tls.caFile"
            case .clientCertificateMissing: "tls.clientCertificateFile"
            case .clientKeyMissing: "tls.clientKeyFile"
            }
        }

        var description: String { rawValue }
    }

    @Test(arguments: UnreadableFile.allCases)
    func unreadableTLSFileIsAConfigErrorNamingTheKey(_ unreadable: UnreadableFile) async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("{\"tls\": {\(unreadable.tlsMembers(in: directory))}}", to: "config.json")
        let commands = [
            ["check-config", "--config", file],
            ["--config", file, "--listen", "127.0.0.1:0", "--upstream", "https://127.0.0.1:9", "--data-dir", directory.file("data")],
        ]
        for arguments in commands {
            let result = try await ChildProcess.run(OutboxProcess.binaryPath, arguments, timeout: .seconds(15))
            let lines = nonEmptyLines(result.stderrText)
            #expect(result.exit == .exited(2), "\(arguments): exit \(result.exit.map { "\($0)" } ?? "none"); stderr:\n\(result.stderrText)")
            #expect(lines.count == 1, "\(arguments): stderr:\n\(result.stderrText)")
            #expect(lines.first?.contains(unreadable.key) == true, "\(arguments): stderr:\n\(result.stderrText)")
            #expect(!looksLikeStackTrace(result.stderrText + result.stdoutText))
        }
    }
}
