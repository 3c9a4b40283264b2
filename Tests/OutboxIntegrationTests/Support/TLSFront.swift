import Foundation
import Glibc

/// The TLS fixtures in `Tests/Fixtures/tls` (their README says what each is) and the config
/// that makes the proxy trust the test CA: `tls.caFile`, so nothing has to be installed in the
/// system trust store.
enum TLSFixtures {
    /// A certificate and its key, by the file name stem (`server` is `server.pem` and `server-key.pem`).
    enum Identity: String, Sendable {
        /// Signed by the test CA for 127.0.0.1 and localhost.
        case server
        /// Self-signed, for the same names.
        case untrusted
        /// Signed by the test CA for the same names, expired.
        case expired
        /// Signed by the test CA for `localhost` only: wrong for 127.0.0.1.
        case wrongHost = "wrong-host"
        /// A client certificate signed by the client CA.
        case client
        /// Signed by the test CA, `CN=localhost` and no subjectAltName: good for no host.
        case cnOnly = "cn-only"
        /// `server` with an RSA key, for RSA-keyed TLS 1.2 suites.
        case rsaServer = "rsa-server"

        var certificatePath: String { TLSFixtures.file("\(rawValue).pem") }
        var keyPath: String { TLSFixtures.file("\(rawValue)-key.pem") }
    }

    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let directory = testsDirectory.appendingPathComponent("Fixtures/tls").path
    static let frontScript = testsDirectory.appendingPathComponent("Scripts/tls_front.py").path

    /// The loopback-only test CA that signed `server`, `expired` and `wrongHost`.
    static var caFile: String { file("ca.pem") }
    /// The CA that signed `client`.
    static var clientCAFile: String { file("client-ca.pem") }

    static func file(_ name: String) -> String {
        directory + "/" + name
    }

    /// A config file that trusts the test CA, with more members of `tls` (`tls`, JSON text
    /// without braces) and more top-level members (`other`).
    static func config(tls: String = "", other: String = "") -> String {
        var members = #""tls": {"caFile": \#(jsonString(caFile))"#
        if !tls.isEmpty { members += ", " + tls }
        members += "}"
        if !other.isEmpty { members += ", " + other }
        return "{" + members + "}"
    }

    /// `tls` members that present the client certificate (mTLS).
    static var clientCertificateConfig: String {
        #""clientCertificateFile": \#(jsonString(Identity.client.certificatePath)), "clientKeyFile": \#(jsonString(Identity.client.keyPath))"#
    }

    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

/// `Tests/Scripts/tls_front.py` as a child process: TLS on 127.0.0.1:PORT in front of a
/// `TestUpstream`, relaying bytes both ways unchanged, so the tests script the origin's raw
/// bytes as for plain http and see what the proxy sent. It reports each TCP connection, each
/// handshake (with the ALPN protocol chosen and the SNI name received) and each failed one,
/// which is how a test tells that the proxy did connect, reused a connection, or refused the
/// certificate. Killed with this object.
final class TLSFront: Sendable, CustomStringConvertible {
    /// One completed handshake as the front reported it.
    struct Handshake: Sendable, Equatable {
        let number: Int
        /// The ALPN protocol selected, nil when the client offered none.
        let alpn: String?
        /// The SNI host name the client sent, nil when it sent none.
        let serverName: String?
        /// The client resumed a session of an earlier connection (a short handshake).
        let resumed: Bool
    }

    let child: ChildProcess
    let port: UInt16

    private init(child: ChildProcess, port: UInt16) {
        self.child = child
        self.port = port
    }

    /// Starts a front relaying to `backend` and presenting `identities[0]`; `switchCertificate()`
    /// moves on to the next one. With `clientCA`, the front requires a client certificate
    /// signed by it. With `ipv6Loopback`, it also listens on [::1] at its port when it can, for
    /// a client that connects to `localhost` and may resolve it to ::1 first. With
    /// `tls12Ciphers` (an OpenSSL cipher list), it speaks TLS 1.2 at most, with those suites only.
    static func start(relayingTo backend: TestUpstream, presenting identities: [TLSFixtures.Identity] = [.server],
                      clientCA: String? = nil, ipv6Loopback: Bool = false, tls12Ciphers: String? = nil) async throws -> TLSFront {
        var arguments = ["--backend", backend.authority]
        for identity in identities {
            arguments += ["--cert", identity.certificatePath, "--key", identity.keyPath]
        }
        if let clientCA { arguments += ["--client-ca", clientCA] }
        if let tls12Ciphers { arguments += ["--tls12-ciphers", tls12Ciphers] }
        if ipv6Loopback { arguments.append("--ipv6-loopback") }
        return try await launch(arguments)
    }

    /// Starts a front that accepts TCP connections and never answers a handshake.
    static func startSilent() async throws -> TLSFront {
        try await launch(["--silent"])
    }

    private static func launch(_ arguments: [String], timeout: Duration = .seconds(20)) async throws -> TLSFront {
        guard let python = ChildProcess.which("python3") else {
            throw HarnessError("python3 is not on PATH: the https upstream tests need it for \(TLSFixtures.frontScript)")
        }
        let child = try ChildProcess(executable: python, arguments: [TLSFixtures.frontScript] + arguments)
        let result: Result<UInt16, HarnessError> = try await child.observed.wait(
            timeout: timeout,
            describeTimeout: { observed in "tls_front.py printed no listening line; stderr:\n\(observed.stderrText.suffix(4000))" },
            until: { observed in
                for line in completeLines(observed.stdoutText) where line.hasPrefix("listening ") {
                    if let port = UInt16(line.dropFirst("listening ".count)), port != 0 { return .success(port) }
                }
                if observed.stdoutClosed {
                    return .failure(HarnessError("tls_front.py ended before listening; stderr:\n\(observed.stderrText.suffix(4000))"))
                }
                return nil
            }
        )
        return TLSFront(child: child, port: try result.get())
    }

    /// `127.0.0.1:PORT`, what the proxy must send as `Host`.
    var authority: String { "127.0.0.1:\(port)" }

    /// `https://127.0.0.1:PORT`, the upstream to give the proxy and its origin in `/admin/status`.
    var baseURL: String { "https://\(authority)" }

    /// Completed handshakes so far, in order.
    var handshakes: [Handshake] { Self.handshakes(in: child.observed.value) }

    /// TLS connections established so far.
    var connections: Int { handshakes.count }

    /// TCP connections accepted so far (handshake or not).
    var acceptedConnections: Int { Self.lines(in: child.observed.value, "accepted ").count }

    /// The reasons of the failed handshakes so far (OpenSSL's, or `eof`, `timeout`).
    var failedHandshakes: [String] { Self.failures(in: child.observed.value) }

    /// Waits until at least `count` handshakes failed; returns every reason so far.
    @discardableResult
    func waitForFailedHandshake(count: Int = 1, timeout: Duration = .seconds(10)) async throws -> [String] {
        try await waitFor(count, "failed handshakes", timeout: timeout, in: Self.failures)
    }

    /// Waits until at least `count` handshakes completed; returns all so far.
    @discardableResult
    func waitForConnections(_ count: Int = 1, timeout: Duration = .seconds(10)) async throws -> [Handshake] {
        try await waitFor(count, "TLS connections", timeout: timeout, in: Self.handshakes)
    }

    /// Waits until at least `count` TCP connections were accepted.
    func waitForAccepted(_ count: Int, timeout: Duration = .seconds(10)) async throws {
        _ = try await waitFor(count, "accepted connections", timeout: timeout) { Self.lines(in: $0, "accepted ") }
    }

    /// Waits until `events` finds at least `count` reports in the front's output; returns them.
    private func waitFor<Event: Sendable>(_ count: Int, _ what: String, timeout: Duration,
                                          in events: @escaping @Sendable (ChildProcess.Observed) -> [Event]) async throws -> [Event] {
        try await child.observed.wait(
            timeout: timeout,
            describeTimeout: { observed in "fewer than \(count) \(what) at the front:\n\(observed.stdoutText.suffix(2000))" },
            until: { observed in
                let found = events(observed)
                return found.count >= count ? found : nil
            }
        )
    }

    /// Sends SIGUSR1 and waits until the front says it presents the next certificate: it has
    /// closed its established connections, and every connection accepted from then on gets it.
    func switchCertificate(timeout: Duration = .seconds(10)) async throws {
        let switched = Self.lines(in: child.observed.value, "certificate ").count
        child.signal(SIGUSR1)
        _ = try await child.observed.wait(
            timeout: timeout,
            describeTimeout: { observed in "the front did not switch its certificate:\n\(observed.stdoutText.suffix(2000))" },
            until: { observed in Self.lines(in: observed, "certificate ").count > switched ? true : nil }
        )
    }

    private static func lines(in observed: ChildProcess.Observed, _ prefix: String) -> [Substring] {
        completeLines(observed.stdoutText).filter { $0.hasPrefix(prefix) }.map { $0.dropFirst(prefix.count) }
    }

    /// `connection N alpn=PROTO sni=NAME resumed=yes|no`, `-` meaning none.
    private static func handshakes(in observed: ChildProcess.Observed) -> [Handshake] {
        lines(in: observed, "connection ").map { rest in
            let words = rest.split(separator: " ")
            func value(_ key: String) -> String? {
                guard let word = words.first(where: { $0.hasPrefix(key + "=") }) else { return nil }
                let value = String(word.dropFirst(key.count + 1))
                return value == "-" ? nil : value
            }
            return Handshake(number: words.first.flatMap { Int($0) } ?? 0, alpn: value("alpn"), serverName: value("sni"),
                             resumed: value("resumed") == "yes")
        }
    }

    /// `handshake-failed N REASON`.
    private static func failures(in observed: ChildProcess.Observed) -> [String] {
        lines(in: observed, "handshake-failed ").map { rest in
            String(rest.drop { $0 != " " }.dropFirst())
        }
    }

    var description: String {
        "tls_front.py pid \(child.pid) on port \(port); stdout:\n\(child.stdoutText.suffix(2000))\nstderr:\n\(child.stderrText.suffix(2000))"
    }
}

/// A port whose connects neither succeed nor fail until the client gives up: a listener with a
/// backlog of 0 whose one queue slot is taken by a connection of ours and never accepted.
/// Linux drops a SYN to a listener whose accept queue is full (the client retransmits it,
/// backing off), so this is a connect timeout on loopback that does not depend on routing.
final class UnresponsivePort {
    let port: UInt16
    private let listener: Int32
    private let queued: Int32

    init() throws {
        let (listener, port) = try Socket.listen(backlog: 0)
        let queued: Int32
        do {
            queued = try Socket.connect(port: port, deadline: Deadline(after: .seconds(5)))
            try Self.waitUntilQueueFull(listener)
        } catch {
            close(listener)
            throw error
        }
        self.listener = listener
        self.port = port
        self.queued = queued
    }

    deinit {
        close(queued)
        close(listener)
    }

    /// For a listener, TCP_INFO reports the accept queue's length in `tcpi_unacked` and its
    /// limit in `tcpi_sacked`. The connect returns once the SYN-ACK came back; the final ACK
    /// that queues the connection is processed right behind it on loopback.
    private static func waitUntilQueueFull(_ listener: Int32) throws {
        let deadline = Deadline(after: .seconds(2))
        while true {
            var info = tcp_info()
            var length = socklen_t(MemoryLayout<tcp_info>.size)
            guard getsockopt(listener, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else {
                throw SocketError.system("getsockopt TCP_INFO", errno)
            }
            if info.tcpi_unacked > info.tcpi_sacked { return }
            if deadline.hasPassed {
                throw HarnessError("the accept queue of port \(port(of: listener)) holds \(info.tcpi_unacked) of \(info.tcpi_sacked)")
            }
            sched_yield()
        }
    }

    private static func port(of fd: Int32) -> String {
        (try? Socket.localPort(of: fd)).map(String.init) ?? "?"
    }
}
