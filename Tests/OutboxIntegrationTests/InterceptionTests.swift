import Foundation
import Glibc
import TestPrerequisites
import Testing

/// Interception with the clients people actually point at `HTTPS_PROXY`: curl, Python
/// `requests`, Node.js and git run as child processes against the real binary, each trusting
/// the interception CA the way its users make it trust one (a flag or the client's own
/// environment variable), never the system store. The origin is a `TestUpstream` behind a TLS
/// front on 127.0.0.1 (`InterceptedOrigin`), so what a client sent arrives at the origin over
/// the proxy's own TLS connection and the test sees it there.
///
/// The story each client goes through: the origin is up, so a read is forwarded and answered
/// by the origin; the origin goes away (the `TestUpstream` behind the front stops, so the
/// proxy's connection to the origin drops before any answer), so a write is stored and
/// answered `202` inside the client's TLS session; the origin comes back, so the write is
/// delivered, over a new TLS connection, with the idempotency key the client was given.
@Suite("HTTPS interception with real clients", .harnessThreads)
struct InterceptionTests {
    static let curl = ChildProcess.which("curl")
    static let python = ChildProcess.which("python3")
    static let node = ChildProcess.which("node")
    static let git = ChildProcess.which("git")
    static let openssl = ChildProcess.which("openssl")

    static let scripts = TLSFixtures.testsDirectory.appendingPathComponent("Scripts").path

    /// Reads answer `read TARGET`; writes answer `201 stored BODY`.
    static let origin: TestUpstream.Handler = { request in
        request.method == "GET"
            ? .respond(.text("read \(request.target)"))
            : .respond(.text("stored \(request.bodyText)", status: 201))
    }

    // MARK: - the story, per client

    @Test(.requires(curl != nil, "curl is not installed"))
    func curlWithProxyFlagAndCACertReadsQueuesAndDelivers() async throws {
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let directory = try TemporaryDirectory()
        try await Self.upDownDelivered(origin, client: "curl-x", sendingKey: "curl-x-key-1") { method, path, body, headers in
            try await Self.runCurl(["-x", origin.outbox.baseURL, "--cacert", origin.caCertificateFile]
                + Self.curlRequest(method, origin.url(path), body: body, headers: headers), in: directory).answer()
        }
    }

    /// `HTTPS_PROXY` and `CURL_CA_BUNDLE` instead of flags, and no key from the client: the
    /// proxy generates one, tells it in the `202`, and delivers the write with it.
    @Test(.requires(curl != nil, "curl is not installed"))
    func curlWithHttpsProxyEnvironmentQueuesWithAGeneratedKey() async throws {
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let directory = try TemporaryDirectory()
        let environment = Self.clientEnvironment(in: directory, [
            "HTTPS_PROXY": origin.outbox.baseURL, "CURL_CA_BUNDLE": origin.caCertificateFile,
        ])
        try await Self.upDownDelivered(origin, client: "curl-env", sendingKey: nil) { method, path, body, headers in
            try await Self.runCurl(Self.curlRequest(method, origin.url(path), body: body, headers: headers),
                                   environment: environment, in: directory).answer()
        }
    }

    @Test(.requires(python != nil, "python3 is not installed"))
    func pythonRequestsWithHttpsProxyReadsQueuesAndDelivers() async throws {
        let python = try #require(Self.python)
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let directory = try TemporaryDirectory()
        let environment = Self.clientEnvironment(in: directory, [
            "HTTPS_PROXY": origin.outbox.baseURL, "REQUESTS_CA_BUNDLE": origin.caCertificateFile,
        ])
        try await Self.upDownDelivered(origin, client: "requests", sendingKey: "requests-key-1") { method, path, body, headers in
            let arguments = [Self.scripts + "/requests_client.py"] + Self.scriptRequest(method, origin.url(path), body: body, headers: headers)
            return try Self.scriptAnswer(try await ChildProcess.run(python, arguments, environment: environment), "requests_client.py")
        }
    }

    /// Node has no proxy support of its own: the script opens the tunnel with a CONNECT and
    /// runs `https.request` over `tls.connect` on it, trusting the CA via `NODE_EXTRA_CA_CERTS`.
    @Test(.requires(node != nil, "node is not installed"))
    func nodeThroughAConnectTunnelReadsQueuesAndDelivers() async throws {
        let node = try #require(Self.node)
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let directory = try TemporaryDirectory()
        let environment = Self.clientEnvironment(in: directory, ["NODE_EXTRA_CA_CERTS": origin.caCertificateFile])
        try await Self.upDownDelivered(origin, client: "node", sendingKey: nil) { method, path, body, headers in
            let arguments = [Self.scripts + "/node_client.js", "--proxy", origin.outbox.baseURL]
                + Self.scriptRequest(method, origin.url(path), body: body, headers: headers)
            return try Self.scriptAnswer(try await ChildProcess.run(node, arguments, environment: environment), "node_client.js")
        }
    }

    /// git reads the smart-HTTP ref advertisement through the interception. Git's writes are
    /// a `POST …/git-receive-pack` whose answer git needs at once (the push's result), so
    /// queueing one makes no sense; what a user sees while the origin is down is the read that
    /// starts every git command failing: the proxy answers its GET `503`, and git exits 128
    /// saying so.
    @Test(.requires(git != nil, "git is not installed"))
    func gitLsRemoteListsTheRefAndReportsTheProxysUnavailableWhenTheOriginIsDown() async throws {
        let git = try #require(Self.git)
        let commit = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        let origin = try await InterceptedOrigin.start { request in
            guard request.target == "/repo.git/info/refs?service=git-upload-pack" else {
                return .respond(.text("no such file", status: 404))
            }
            let advertisement = Self.pktLine("# service=git-upload-pack\n") + "0000"
                + Self.pktLine("\(commit) refs/heads/main\0agent=outbox-test\n") + "0000"
            return .respond(UpstreamResponse(headers: [
                HeaderField("Content-Type", "application/x-git-upload-pack-advertisement"),
                HeaderField("Cache-Control", "no-cache"),
            ], body: .bytes(Array(advertisement.utf8))))
        }
        let directory = try TemporaryDirectory()
        let environment = Self.clientEnvironment(in: directory, [
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C", "LANG": "C",
        ])
        let arguments = ["-c", "http.proxy=\(origin.outbox.baseURL)", "-c", "http.sslCAInfo=\(origin.caCertificateFile)",
                         "ls-remote", origin.url("/repo.git")]

        let listed = try await ChildProcess.run(git, arguments, environment: environment)
        #expect(listed.exit == .exited(0), "git ls-remote: \(listed.stderrText)\n\(origin.diagnostics)")
        #expect(listed.stdoutText == "\(commit)\trefs/heads/main\n", "git printed:\n\(listed.stdoutText)")
        let request = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(request.method == "GET" && request.target == "/repo.git/info/refs?service=git-upload-pack", "\(request)")
        #expect(request.headers["User-Agent"]?.hasPrefix("git/") == true, "\(request.headers)")
        #expect(request.headers.values("Via") == ["1.1 outbox"], "\(request.headers)")

        origin.backend.stop()
        let down = try await ChildProcess.run(git, arguments, environment: environment)
        #expect(down.exit == .exited(128), "git ls-remote with the origin down: \(down.exit)\n\(down.stderrText)")
        #expect(down.stderrText.contains("fatal: unable to access '\(origin.url("/repo.git/"))'"), "\(down.stderrText)")
        #expect(down.stderrText.contains("The requested URL returned error: 503"), "\(down.stderrText)\n\(origin.diagnostics)")
        #expect(down.stdoutText.isEmpty, "git listed refs with the origin down: \(down.stdoutText)")
        #expect(origin.backend.requests.count == 1, "\(origin.diagnostics)")
    }

    /// Inside one intercepted tunnel, requests are kept alive and pipelined as on a plain
    /// connection: two requests written at once get two answers, in order, on the one TLS
    /// session (Python's `ssl` as the client, so nothing hides a new connection).
    @Test(.requires(python != nil, "python3 is not installed"))
    func pipelinedRequestsInOneInterceptedTunnelAreAnsweredInOrder() async throws {
        let python = try #require(Self.python)
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let script = InterceptedOrigin.pythonTunnelPrelude + """
            tls = ssl.create_default_context(cafile=cafile).wrap_socket(raw, server_hostname=target.rsplit(":", 1)[0])
            tls.sendall(("GET /pipe/1 HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n"
                         "GET /pipe/2 HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % (target, target)).encode())
            received = read_to_end(tls)
            sys.stdout.write(received.decode("latin-1"))
            """
        let result = try await ChildProcess.run(python, ["-c", script, "127.0.0.1:\(origin.outbox.port)",
                                                         origin.front.authority, origin.caCertificateFile])
        #expect(result.exit == .exited(0), "client: \(result.exit)\n\(result.stderrText)\n\(origin.diagnostics)")
        let text = result.stdoutText
        let first = try #require(text.range(of: "read /pipe/1"), "no answer to /pipe/1:\n\(text)")
        let second = try #require(text.range(of: "read /pipe/2"), "no answer to /pipe/2:\n\(text)")
        #expect(first.lowerBound < second.lowerBound, "answers out of order:\n\(text)")
        #expect(text.components(separatedBy: "HTTP/1.1 200").count - 1 == 2, "\(text)")
        let requests = try await origin.backend.waitForRequests(2)
        #expect(requests.map(\.target) == ["/pipe/1", "/pipe/2"], "\(origin.diagnostics)")
        #expect(origin.front.connections == 1, "the two requests took \(origin.front.connections) TLS connections upstream")
    }

    // MARK: - trust, tunnels and hosts

    /// A client that does not trust the interception CA refuses the handshake, and the proxy
    /// never has a request to forward: the origin gets nothing.
    @Test(.requires(curl != nil, "curl is not installed"))
    func curlNotTrustingTheCAFailsVerificationAndNothingReachesTheOrigin() async throws {
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let directory = try TemporaryDirectory()
        let result = try await Self.runCurl(["-x", origin.outbox.baseURL, "-X", "POST", "-d", "secret", origin.url("/refused")],
                                            in: directory)
        #expect(result.exit == .exited(60), "curl: \(result.exit)\n\(result.stderr)\n\(origin.diagnostics)")
        #expect(result.stderr.contains("certificate"), "\(result.stderr)")
        try await origin.outbox.waitForLog(containing: "client_tls_failed")
        #expect(origin.backend.receivedByteCount == 0, "\(origin.diagnostics)")
        #expect(origin.reverseUpstream.receivedByteCount == 0, "\(origin.diagnostics)")
        let status = try JSONObject(origin.outbox.admin("status"))
        #expect(status.object("counts")?.int("pending") == 0, "a refused handshake stored something: \(status)")
    }

    /// `localhost` is allowed but not intercepted: its CONNECT stays a byte tunnel, so curl
    /// sees the front's own certificate (issued by the test CA, which it is told to trust, and
    /// not by the interception CA) and the origin gets curl's request untouched (no `Via`).
    @Test(.requires(curl != nil, "curl is not installed"))
    func connectToAHostNotInterceptedIsStillATunnel() async throws {
        let origin = try await InterceptedOrigin.start(allowedHosts: ["127.0.0.1", "localhost"], exportingCA: false,
                                                       ipv6Loopback: true,
                                                       handler: Self.origin)
        let directory = try TemporaryDirectory()
        let url = "https://localhost:\(origin.front.port)/tunnelled"
        let result = try await Self.runCurl(["-v", "--http1.1", "-x", origin.outbox.baseURL, "--cacert", TLSFixtures.caFile, url],
                                            in: directory)
        #expect(result.exit == .exited(0), "curl: \(result.exit)\n\(result.stderr)\n\(origin.diagnostics)")
        #expect(result.status == 200 && result.body == "read /tunnelled", "\(result)")
        let issuer = result.stderr.split(separator: "\n").first { $0.contains("issuer:") }
        #expect(issuer?.contains("Outbox test loopback CA") == true, "curl -v:\n\(result.stderr)")
        #expect(!result.stderr.contains("Outbox interception CA"), "curl -v:\n\(result.stderr)")

        let request = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(request.headers.values("Host") == ["localhost:\(origin.front.port)"], "\(request.headers)")
        #expect(!request.headers.contains("Via") && !request.headers.contains("X-Forwarded-Proto"),
                "the proxy read the tunnelled request:\n\(request.headers)")
        // The front's handshake was curl's: it sent SNI for the name (the proxy's own
        // connections to an intercepted 127.0.0.1 send none).
        let handshake = try #require(try await origin.front.waitForConnections(1).first)
        #expect(handshake.serverName == "localhost", "\(origin.front)")
    }

    /// Inside a tunnel to 127.0.0.1:PORT, a request for another authority is refused with
    /// `421 Misdirected Request`, and not forwarded anywhere.
    @Test(.requires(curl != nil, "curl is not installed"))
    func requestForAnotherHostInsideAnInterceptedTunnelIsMisdirected() async throws {
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let directory = try TemporaryDirectory()
        let result = try await Self.runCurl([
            "-x", origin.outbox.baseURL, "--cacert", origin.caCertificateFile, "-H", "Host: other.example",
            "-X", "POST", "-d", "not for you", origin.url("/misdirected"),
        ], in: directory)
        #expect(result.exit == .exited(0), "curl: \(result.exit)\n\(result.stderr)\n\(origin.diagnostics)")
        #expect(result.status == 421, "\(result)\n\(origin.diagnostics)")
        let envelope = try? JSONObject(parsing: Array(result.body.utf8)).object("error")
        #expect(envelope?.string("code")?.isEmpty == false, "421 body is not an error envelope: \(result.body)")
        #expect(origin.backend.receivedByteCount == 0, "\(origin.diagnostics)")
        #expect(origin.reverseUpstream.receivedByteCount == 0, "\(origin.diagnostics)")
    }

    // MARK: - the CA

    /// The CA the proxy creates on its own (no `outbox ca` first): files and modes, a critical
    /// name constraint permitting only 127.0.0.1, a leaf for the client's connection issued by
    /// it with 127.0.0.1 as its subjectAltName; `outbox ca` then prints that same certificate
    /// and never the key.
    @Test(.requires(openssl != nil, "openssl is not installed"))
    func createdCAIsConstrainedPrivateAndIssuesTheLeafTheClientSees() async throws {
        let openssl = try #require(Self.openssl)
        let origin = try await InterceptedOrigin.start(exportingCA: false, handler: Self.origin)
        let directory = try TemporaryDirectory()

        let handshake = try await ChildProcess.run(openssl, [
            "s_client", "-proxy", "127.0.0.1:\(origin.outbox.port)", "-connect", origin.front.authority, "-showcerts",
        ])
        #expect(handshake.exit == .exited(0), "openssl s_client: \(handshake.stderrText)\n\(origin.diagnostics)")
        let leaf = try #require(Self.firstCertificate(in: handshake.stdoutText), "s_client printed:\n\(handshake.stdoutText)")
        let leafFile = try directory.write(leaf, to: "leaf.pem")

        #expect(DataDirectoryInspection.permissions(origin.caDirectory) == 0o700, "\(origin.caDirectory)")
        #expect(DataDirectoryInspection.permissions(origin.caCertificateFile) == 0o644, "\(origin.caCertificateFile)")
        #expect(DataDirectoryInspection.permissions(origin.caKeyFile) == 0o600, "\(origin.caKeyFile)")

        let caText = try await Self.run(openssl, ["x509", "-in", origin.caCertificateFile, "-noout", "-text"])
        #expect(caText.contains("X509v3 Name Constraints: critical"), "\(caText)")
        #expect(caText.contains("IP:127.0.0.1/255.255.255.255"), "\(caText)")
        #expect(caText.contains("CA:TRUE"), "\(caText)")
        #expect(caText.contains("NIST CURVE: P-256"), "\(caText)")
        let caSubject = try await Self.run(openssl, ["x509", "-in", origin.caCertificateFile, "-noout", "-subject", "-nameopt", "RFC2253"])
        #expect(caSubject.contains("CN=Outbox interception CA ("), "\(caSubject)")

        let leafIssuer = try await Self.run(openssl, ["x509", "-in", leafFile, "-noout", "-issuer", "-nameopt", "RFC2253"])
        #expect(leafIssuer.dropFirst("issuer=".count) == caSubject.dropFirst("subject=".count), "leaf issuer \(leafIssuer), CA \(caSubject)")
        let leafText = try await Self.run(openssl, ["x509", "-in", leafFile, "-noout", "-ext", "subjectAltName"])
        #expect(leafText.contains("IP Address:127.0.0.1"), "\(leafText)")
        #expect(!leafText.contains("DNS:"), "\(leafText)")
        let verified = try await Self.run(openssl, ["verify", "-CAfile", origin.caCertificateFile, "-verify_ip", "127.0.0.1", leafFile])
        #expect(verified.trimmingCharacters(in: "\n") == "\(leafFile): OK", "\(verified)")

        let printed = try await origin.exportCA()
        let file = try String(contentsOfFile: origin.caCertificateFile, encoding: .utf8)
        #expect(printed == file, "outbox ca printed another certificate than the proxy uses:\n\(printed)")
        #expect(!printed.contains("PRIVATE KEY"), "outbox ca printed a key")
    }

    @Test(.requires(openssl != nil, "openssl is not installed"))
    func statusShowsTheInterceptedHostsAndTheCAFingerprint() async throws {
        let openssl = try #require(Self.openssl)
        let origin = try await InterceptedOrigin.start(handler: Self.origin)
        let response = try origin.outbox.admin("status")
        let status = try JSONObject(response)
        let interception = try #require(status.object("interception"), "\(status)")
        #expect(interception.fields["hosts"] as? [String] == ["127.0.0.1"], "\(interception)")
        let shown = try #require(interception.string("caSha256"), "\(interception)")
        #expect(shown.count == 64 && shown.allSatisfy(\.isHexDigit), "caSha256 \(shown)")

        let fingerprint = try await Self.run(openssl, ["x509", "-in", origin.caCertificateFile, "-noout", "-fingerprint", "-sha256"])
        let hex = fingerprint.split(separator: "=").last.map { $0.replacingOccurrences(of: ":", with: "") }?
            .trimmingCharacters(in: "\n")
        #expect(hex?.lowercased() == shown.lowercased(), "openssl: \(fingerprint), status: \(shown)")
        #expect(!response.bodyText.contains("PRIVATE KEY"), "\(response.bodyText)")
    }

    // MARK: - helpers

    /// What a client program reported: the final response (after the CONNECT's).
    struct Answer: Sendable, CustomStringConvertible {
        let status: Int
        let headers: HTTPHeaders
        let body: String

        var description: String { "\(status)\n\(headers)\n\n\(body)" }
    }

    typealias Send = @Sendable (_ method: String, _ path: String, _ body: String?, _ headers: [HeaderField]) async throws -> Answer

    /// Up, down, delivered, as the suite's comment tells it, for one client. `client` names
    /// the paths (`/CLIENT/read`, `/CLIENT/write`); `sendingKey` is the `Idempotency-Key` the
    /// client sends with its write, nil for none.
    static func upDownDelivered(_ origin: InterceptedOrigin, client: String, sendingKey: String?,
                                send: Send) async throws {
        // Up: the origin's own answer, and the origin saw a request that came over https.
        let read = try await send("GET", "/\(client)/read", nil, [])
        #expect(read.status == 200, "\(read)\n\(origin.diagnostics)")
        #expect(read.body == "read /\(client)/read", "\(read)")
        #expect(read.headers.values("Via") == ["1.1 outbox"], "\(read)")
        let forwarded = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(forwarded.method == "GET" && forwarded.target == "/\(client)/read", "\(forwarded)")
        #expect(forwarded.headers.values("Host") == [origin.front.authority], "\(forwarded.headers)")
        #expect(forwarded.headers.values("X-Forwarded-Proto") == ["https"], "\(forwarded.headers)")
        #expect(forwarded.headers.values("Via") == ["1.1 outbox"], "\(forwarded.headers)")

        // Down: the write is stored and acknowledged inside the client's TLS session.
        origin.backend.stop()
        let payload = "written by \(client)"
        let written = try await send("POST", "/\(client)/write", payload, sendingKey.map { [HeaderField("Idempotency-Key", $0)] } ?? [])
        #expect(written.status == 202, "\(written)\n\(origin.diagnostics)")
        let id = try #require(written.headers["Outbox-Operation-Id"], "202 without Outbox-Operation-Id:\n\(written)")
        let key = try #require(written.headers["Idempotency-Key"], "202 without Idempotency-Key:\n\(written)")
        if let sendingKey {
            #expect(key == sendingKey, "\(written)")
        } else {
            #expect(!key.isEmpty, "\(written)")
        }
        let acknowledgement = try JSONObject(parsing: Array(written.body.utf8))
        #expect(acknowledgement.string("id") == id && acknowledgement.string("idempotencyKey") == key, "\(acknowledgement)")
        #expect(origin.backend.requests.count == 1, "\(origin.diagnostics)")

        // Back: delivered over TLS on a new connection, with the key the client was given.
        try origin.backend.restart()
        let completed = try await origin.outbox.waitForOperation(id, toBe: ["completed"], timeout: .seconds(30))
        #expect(completed.object("response")?.int("status") == 201, "\(completed)")
        let requests = try await origin.backend.waitForRequests(2)
        let delivered = try #require(requests.last { $0.method == "POST" }, "\(origin.diagnostics)")
        #expect(delivered.target == "/\(client)/write", "\(delivered)")
        #expect(delivered.bodyText == payload, "\(delivered)")
        #expect(delivered.headers.values("Idempotency-Key") == [key], "\(delivered.headers)")
        #expect(delivered.headers.values("Host") == [origin.front.authority], "\(delivered.headers)")
        #expect(delivered.connectionID != forwarded.connectionID, "the write came on the connection from before the outage")
        #expect(requests.filter { $0.method == "POST" }.count == 1, "\(origin.diagnostics)")
        #expect(origin.reverseUpstream.receivedByteCount == 0, "intercepted requests reached the reverse-mode upstream")
    }

    /// A curl outcome: exit status, the final response's status, headers and body, its stderr.
    struct CurlResult: Sendable, CustomStringConvertible {
        let exit: ChildProcess.ExitStatus?
        let status: Int
        let headers: HTTPHeaders
        let body: String
        let stderr: String

        /// The response, requiring curl to have succeeded.
        func answer() throws -> Answer {
            guard exit == .exited(0) else { throw HarnessError("curl: \(exit.map { "\($0)" } ?? "no exit")\n\(stderr)") }
            return Answer(status: status, headers: headers, body: body)
        }

        var description: String { "curl \(exit.map { "\($0)" } ?? "-"), \(status)\n\(headers)\n\n\(body)\nstderr:\n\(stderr)" }
    }

    /// The curl arguments that send `method` to `url` with `body` and `headers`.
    static func curlRequest(_ method: String, _ url: String, body: String?, headers: [HeaderField]) -> [String] {
        var arguments = ["-X", method]
        if let body { arguments += ["--data-binary", body] }
        for field in headers { arguments += ["-H", "\(field.name): \(field.value)"] }
        return arguments + [url]
    }

    /// Runs curl (no config file, `--max-time 20`) writing the body and headers to files in
    /// `directory`. With a proxy, the header file holds the CONNECT's response first: the
    /// final response's block is the last one.
    static func runCurl(_ arguments: [String], environment: [String: String]? = nil,
                        in directory: TemporaryDirectory) async throws -> CurlResult {
        let curl = try #require(Self.curl)
        let bodyFile = directory.file("curl-body")
        let headerFile = directory.file("curl-headers")
        for file in [bodyFile, headerFile] { unlink(file) }
        let run = try await ChildProcess.run(curl, [
            "-q", "-sS", "--max-time", "20", "-o", bodyFile, "-D", headerFile, "-w", "%{http_code}",
        ] + arguments, environment: environment ?? clientEnvironment(in: directory, [:]))
        let body = (try? String(contentsOfFile: bodyFile, encoding: .utf8)) ?? ""
        let headerText = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
        return CurlResult(exit: run.exit, status: Int(run.stdoutText) ?? -1, headers: lastHeaderBlock(headerText),
                          body: body, stderr: run.stderrText)
    }

    /// The header fields of the last response head in curl's `-D` output.
    static func lastHeaderBlock(_ text: String) -> HTTPHeaders {
        var fields: [HeaderField] = []
        for line in nonEmptyLines(text).map({ $0.trimmingCharacters(in: "\r") }) {
            if line.hasPrefix("HTTP/") {
                fields = []
            } else if let colon = line.firstIndex(of: ":") {
                fields.append(HeaderField(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: " \t")))
            }
        }
        return HTTPHeaders(fields)
    }

    /// The arguments of `requests_client.py` and `node_client.js` that send `method` to `url`
    /// with `body` and `headers`.
    static func scriptRequest(_ method: String, _ url: String, body: String?, headers: [HeaderField]) -> [String] {
        var arguments = ["--url", url, "--method", method]
        if let body { arguments += ["--data", body] }
        for field in headers { arguments += ["--header", "\(field.name): \(field.value)"] }
        return arguments
    }

    /// The answer a client script printed (`{"status", "headers": [[name, value]], "bodyBase64"}`).
    static func scriptAnswer(_ run: ChildProcess.Observed, _ script: String) throws -> Answer {
        guard run.exit == .exited(0) else {
            throw HarnessError("\(script): \(run.exit.map { "\($0)" } ?? "no exit")\n\(run.stderrText)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any],
              let status = object["status"] as? Int,
              let body = Data(base64Encoded: object["bodyBase64"] as? String ?? "")
        else { throw HarnessError("\(script) printed no answer:\n\(run.stdoutText)\n\(run.stderrText)") }
        let pairs = object["headers"] as? [[String]] ?? []
        return Answer(status: status, headers: HTTPHeaders(pairs.filter { $0.count == 2 }.map { HeaderField($0[0], $0[1]) }),
                      body: String(decoding: body, as: UTF8.self))
    }

    /// The children's environment: nothing that would pick a proxy or a CA bundle unless the
    /// test names it in `extra`, and `HOME` in `directory` so no user config file is read.
    static func clientEnvironment(in directory: TemporaryDirectory, _ extra: [String: String]) -> [String: String] {
        let trustVariables: Set = ["CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
                                   "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "GIT_SSL_NO_VERIFY", "NODE_OPTIONS"]
        var environment = ChildProcess.cleanEnvironment().filter { !trustVariables.contains($0.key) }
        environment["HOME"] = directory.path
        return environment.merging(extra) { _, new in new }
    }

    /// Runs a command that must succeed; returns its stdout.
    static func run(_ executable: String, _ arguments: [String]) async throws -> String {
        let run = try await ChildProcess.run(executable, arguments)
        guard run.exit == .exited(0) else {
            throw HarnessError("\(executable) \(arguments.joined(separator: " ")): \(run.exit.map { "\($0)" } ?? "no exit")\n\(run.stderrText)")
        }
        return run.stdoutText
    }

    /// The first PEM certificate in `text` (what `s_client -showcerts` printed), with its end line.
    static func firstCertificate(in text: String) -> String? {
        guard let start = text.range(of: "-----BEGIN CERTIFICATE-----"),
              let end = text.range(of: "-----END CERTIFICATE-----", range: start.upperBound..<text.endIndex)
        else { return nil }
        return String(text[start.lowerBound..<end.upperBound]) + "\n"
    }

    /// One pkt-line of git's protocol: four hex digits of length (themselves included), then the data.
    static func pktLine(_ data: String) -> String {
        let length = String(data.utf8.count + 4, radix: 16)
        return String(repeating: "0", count: 4 - length.count) + length + data
    }
}
