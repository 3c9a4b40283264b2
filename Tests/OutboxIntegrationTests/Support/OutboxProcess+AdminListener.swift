/// The admin listener that `admin.listen` opens beside the main one: its port, read from the
/// line `outbox admin listening on http://127.0.0.1:PORT`, and requests sent to it.
extension OutboxProcess {
    /// What the admin listener prints once it accepts, up to the port.
    static let adminListeningPrefix = "outbox admin listening on http://127.0.0.1:"

    /// The admin listener's port. The proxy prints the admin line before the main one, so it
    /// is there once `start` has returned; throws when the proxy printed none (no
    /// `admin.listen`, or a line for another host).
    func adminPort() throws -> UInt16 {
        guard let port = Self.listeningPort(in: stderrText, prefix: Self.adminListeningPrefix) else {
            throw HarnessError("no \"\(Self.adminListeningPrefix)PORT\" line\n\(self)")
        }
        return port
    }

    /// Sends `method target` with `headers` on a fresh connection to the admin listener, with
    /// `Host: 127.0.0.1:ADMINPORT` unless `host` names another, and reads the response.
    func sendToAdminListener(_ method: String, _ target: String, host: String? = nil, headers: [HeaderField] = [],
                             timeout: Duration = .seconds(10)) throws -> HTTPResponse {
        let port = try adminPort()
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\n"
        for field in headers { head += "\(field.name): \(field.value)\r\n" }
        let client = try RawClient(port: port)
        try client.send(head + "\r\n")
        return try client.readResponse(to: method, timeout: timeout)
    }
}
