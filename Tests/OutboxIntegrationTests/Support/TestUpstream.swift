import Synchronization

/// A scriptable HTTP/1.1 origin on 127.0.0.1:0, written independently of the product's codec:
/// blocking sockets, one thread per connection, keep-alive, Content-Length and chunked request
/// bodies, `Expect: 100-continue`. It records every request it reads, lets a test await the
/// n-th one, and answers as the handler scripts. It can be stopped and restarted on its port.
final class TestUpstream: Sendable {
    /// Decides what to do with each request, on the connection's thread.
    typealias Handler = @Sendable (RecordedRequest) -> UpstreamAction

    /// The handler used when a test does not care: `200 OK` with body `ok`.
    static let answersOK: Handler = { _ in .respond(.text("ok")) }

    private let acceptor: ConnectionAcceptor
    let journal: Journal

    /// Starts listening at once.
    init(handler: @escaping Handler = TestUpstream.answersOK) throws {
        let journal = Journal()
        self.journal = journal
        acceptor = try ConnectionAcceptor { connection in
            UpstreamConnection(connection: connection, handler: handler, journal: journal).serve()
        }
    }

    /// The port, the same after a restart.
    var port: UInt16 { acceptor.port }

    /// `127.0.0.1:PORT`, what the proxy must send as `Host`.
    var authority: String { "127.0.0.1:\(port)" }

    /// `http://127.0.0.1:PORT`.
    var baseURL: String { "http://\(authority)" }

    /// Every complete request received so far, in arrival order.
    var requests: [RecordedRequest] { journal.state.value.requests }

    /// Bytes that reached the upstream on any connection, parsed into a request or not.
    var receivedByteCount: Int { journal.receivedBytes.load(ordering: .relaxed) }

    /// TCP connections accepted so far.
    var acceptedConnectionCount: Int { acceptor.acceptedConnectionCount }

    /// Things the upstream could not parse or that broke off mid-request.
    var problems: [String] { journal.state.value.problems }

    /// Waits until at least `count` requests have arrived and returns all of them.
    @discardableResult
    func waitForRequests(_ count: Int, timeout: Duration = .seconds(10)) async throws -> [RecordedRequest] {
        try await journal.state.wait(
            timeout: timeout,
            describeTimeout: { log in
                "upstream got \(log.requests.count) of \(count) requests in \(timeout): "
                    + "\(log.requests.map { "\($0.method) \($0.target)" }), problems: \(log.problems)"
            },
            until: { log in log.requests.count >= count ? log.requests : nil }
        )
    }

    /// Waits until the peer closed the connection of request `index` while its answer was held
    /// or trickling (see `UpstreamAction.holdUntilPeerCloses`).
    func waitForPeerClose(ofRequest index: Int, timeout: Duration = .seconds(10)) async throws {
        _ = try await journal.state.wait(
            timeout: timeout,
            describeTimeout: { log in
                "the connection of request \(index) was not closed by the peer within \(timeout); closed: \(log.closedByPeer), "
                    + "requests: \(log.requests.map { "\($0.method) \($0.target)" })"
            },
            until: { log in log.closedByPeer.contains(index) ? true : nil })
    }

    /// Closes the listener and every connection: the proxy's next connect is refused.
    func stop() {
        acceptor.stop()
    }

    /// Listens again on the same port.
    func restart() throws {
        try acceptor.restart()
    }

    /// The shared record the connection threads write to.
    final class Journal: Sendable {
        struct Log: Sendable {
            var requests: [RecordedRequest] = []
            var problems: [String] = []
            /// Indexes of the requests whose connection the peer closed while a `trickle`,
            /// `endless` or `holdUntilPeerCloses` answer was under way.
            var closedByPeer: [Int] = []
        }

        let state = WaitableState(Log())
        let receivedBytes = Atomic<Int>(0)
    }
}
