import CSystem
import Dispatch
import Glibc
import OutboxModel

/// The connect probe that tells the reachability tracker (in the queue layer, which knows no
/// sockets) whether an offline origin is back: a TCP connect, and for an `https://` origin a
/// complete TLS handshake too, since a captive portal or a wrong certificate accepts TCP but
/// can serve no request.
package enum TCPProbe {
    /// `answered` when `origin` accepts a connection (and a handshake) within `timeout` each;
    /// `notProbed` when Outbox had no descriptor for the probe's socket (that says nothing about
    /// the origin). Runs the blocking name lookup, connect and handshake on a Dispatch worker,
    /// never on an event loop or Swift's cooperative pool. `tls` gives the context https
    /// origins are checked with.
    package static func make(timeout: Double,
                             tls: @escaping @Sendable () -> TLSContext?) -> @Sendable (Origin) async -> ProbeOutcome {
        { origin in
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(returning: probe(origin, timeout: timeout, tls: tls))
                }
            }
        }
    }

    private static func probe(_ origin: Origin, timeout: Double, tls: () -> TLSContext?) -> ProbeOutcome {
        let addresses = SocketAddress.resolveNumeric(origin.host, port: origin.port).map { [$0] }
            ?? SocketAddress.resolve(host: origin.host, port: origin.port)
        return probe(origin, at: addresses, timeout: timeout, tls: tls)
    }

    /// Tries `addresses` in order, `timeout` each: the origin is back when one of them accepts
    /// (and, for https, completes a handshake). A name's first address may be one the origin
    /// does not listen on (`::1` for a server bound to IPv4 only).
    static func probe(_ origin: Origin, at addresses: [SocketAddress], timeout: Double, tls: () -> TLSContext?) -> ProbeOutcome {
        for address in addresses {
            let fd: Int32
            switch Sockets.connectAndWait(to: address, until: Sockets.deadline(after: timeout)) {
            case .success(let connected): fd = connected
            // No socket to probe with: the other addresses would fare no better.
            case .failure(let error) where error.isResourceShortage: return .notProbed(error.description)
            case .failure: continue
            }
            defer { close(fd) }
            guard origin.scheme == .https else { return .answered }
            guard let context = tls(), let engine = try? TLSEngine(clientOf: context, host: origin.host) else { return .unanswered }
            if handshakes(engine, fd: fd, until: Sockets.deadline(after: timeout)) { return .answered }
        }
        return .unanswered
    }

    /// Drives the handshake over the (non-blocking) socket until it completes, fails or the
    /// deadline passes; with TLS 1.3, also until the server has answered the client's part
    /// (``acceptedAfterHandshake``).
    private static func handshakes(_ engine: TLSEngine, fd: Int32, until end: UInt64) -> Bool {
        let started = MonotonicClock.nanos()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let step = engine.handshake()
            var pending = engine.drainOutput()[...]
            while !pending.isEmpty {
                let sent = pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent > 0 {
                    pending = pending.dropFirst(sent)
                } else if sent < 0 && (errno == EAGAIN || errno == EINTR) {
                    guard Sockets.wait(fd, for: POLLOUT, until: end) else { return false }
                } else {
                    return false
                }
            }
            switch step {
            case .complete:
                guard engine.negotiatedTLS13 else { return true }
                // The server's answer takes about as long as the handshake took: four times
                // that, at least 250 ms, and never past the probe's own deadline.
                let elapsed = MonotonicClock.nanos() &- started
                let grace = min(end, MonotonicClock.nanos() &+ max(4 &* elapsed, 250_000_000))
                return acceptedAfterHandshake(engine, fd: fd, buffer: &buffer, until: grace)
            case .failed: return false
            case .wantRead, .wantWrite:
                guard receive(into: engine, fd: fd, buffer: &buffer, until: end) == .again else { return false }
            }
        }
    }

    /// `again`: bytes were fed (or the wake-up was spurious): look at the engine again.
    private enum Reception { case again, timedOut, ended }

    /// Waits until `end` for bytes from the server and feeds what arrives to `engine`.
    private static func receive(into engine: TLSEngine, fd: Int32, buffer: inout [UInt8], until end: UInt64) -> Reception {
        guard Sockets.wait(fd, for: POLLIN, until: end) else { return .timedOut }
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer.withUnsafeBytes { engine.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            return .again
        }
        // EAGAIN after a wake-up: nothing yet, look again.
        return count < 0 && (errno == EAGAIN || errno == EINTR) ? .again : .ended
    }

    /// After a TLS 1.3 handshake: whether the server accepted the client. An origin that
    /// requires a client certificate completes the client's handshake and only then sends
    /// its refusal, so a probe that stopped at the handshake called such an origin online at
    /// every interval, and every replay attempt failed on it. A session ticket means the server
    /// went on; an alert or a close means it did not; silence until `end` (a server that sends
    /// no tickets) counts as accepted.
    private static func acceptedAfterHandshake(_ engine: TLSEngine, fd: Int32, buffer: inout [UInt8],
                                               until end: UInt64) -> Bool {
        while true {
            switch engine.read(into: &buffer) {
            case .failed, .closed: return false
            case .bytes: return true
            case .wantRead:
                if engine.takeNewSession() != nil { return true }
            }
            switch receive(into: engine, fd: fd, buffer: &buffer, until: end) {
            case .again: continue
            case .timedOut: return true
            case .ended: return false
            }
        }
    }
}
