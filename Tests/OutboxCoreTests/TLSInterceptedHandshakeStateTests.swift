@testable import OutboxProxy
import Testing

/// The client connection between the `200` to an intercepted `CONNECT` and the end of the
/// client's TLS handshake with Outbox, driven by events and a manual clock. From the `200` on
/// the client reads TLS: no event in this phase may be answered with an HTTP error (SPEC §7.2,
/// "nothing but TLS is written on that connection").
@Suite("Intercepted TLS handshake: due within the header timeout, never answered with HTTP")
struct TLSInterceptedHandshakeStateTests {
    typealias Machine = ClientConnectionStateMachine
    typealias Action = ClientConnectionStateMachine.Action

    static let second: UInt64 = 1_000_000_000
    static let headerTimeout = 2 * second
    static let idleTimeout = 60 * second
    static let accepted = 7_000 * second
    /// When the `200` was written.
    static let acceptedTunnel = accepted + second
    static let handshakeDeadline = acceptedTunnel + headerTimeout

    /// A machine whose `CONNECT` has just been answered `200` by Outbox itself.
    static func handshaking(inputBuffered: Bool = false) -> (Machine, Action) {
        var machine = Machine(now: accepted, headerTimeout: headerTimeout, idleTimeout: idleTimeout)
        _ = machine.headReceived()
        let action = machine.interceptedTunnelAccepted(now: acceptedTunnel, inputBuffered: inputBuffered)
        return (machine, action)
    }

    @Test func theHandshakeIsDueWithinTheHeaderTimeoutFromThe200() {
        var (machine, action) = Self.handshaking()
        #expect(action == .none)
        #expect(machine.state == .handshaking(deadline: Self.handshakeDeadline))
        #expect(machine.isHandshaking && !machine.isHTTP)
        #expect(machine.sweep(at: Self.handshakeDeadline - 1, inputPending: true) == .none)
    }

    /// Half a ClientHello buffered (`inputPending`) would make a head-reading connection
    /// answer `408`; here it is a silent close, whatever is pending.
    @Test(arguments: [false, true])
    func aStalledHandshakeIsClosedSilentlyAtTheDeadline(inputPending: Bool) {
        var (machine, _) = Self.handshaking()
        #expect(machine.sweep(at: Self.handshakeDeadline, inputPending: inputPending) == .closeStalledHandshake)
        #expect(machine.state == .closed)
        #expect(machine.sweep(at: Self.handshakeDeadline + Self.second, inputPending: inputPending) == .none)
    }

    @Test func bytesThatCameWithTheConnectAreParsedAsTheClientHello() {
        var (machine, action) = Self.handshaking(inputBuffered: true)
        #expect(action == .parseInput)
        #expect(machine.bytesReadable() == .parseInput)
        // The pass that started the CONNECT exchange asked for another: it runs, handshaking.
        let answers = [machine.beginParsing(), machine.beginParsing(), machine.parsePassEnded(), machine.parsePassEnded()]
        #expect(answers == [true, false, true, false])
    }

    @Test func aPausedConnectResumesReadingForTheHandshake() {
        var machine = Machine(now: Self.accepted, headerTimeout: Self.headerTimeout, idleTimeout: Self.idleTimeout)
        _ = machine.headReceived()
        _ = machine.inputBackedUp()
        #expect(machine.interceptedTunnelAccepted(now: Self.acceptedTunnel, inputBuffered: true) == .resumeReading)
        #expect(machine.state == .handshaking(deadline: Self.handshakeDeadline))
    }

    @Test func aClientThatSentEOFWithItsConnectCannotHandshake() {
        var machine = Machine(now: Self.accepted, headerTimeout: Self.headerTimeout, idleTimeout: Self.idleTimeout)
        _ = machine.headReceived()
        _ = machine.peerClosed(failed: false, requestComplete: true)
        #expect(machine.interceptedTunnelAccepted(now: Self.acceptedTunnel, inputBuffered: true) == .close(.afterFlush))
        #expect(machine.state == .closed)
    }

    /// As on a newly accepted connection: the first request's head is due within the header
    /// timeout, and from now on the client reads TLS, so a `408` is written inside it.
    @Test func aCompletedHandshakeLeadsToRequestsUnderTheHeaderClock() {
        var (machine, _) = Self.handshaking()
        let done = Self.acceptedTunnel + Self.second / 2
        #expect(machine.handshakeCompleted(now: done) == .none)
        #expect(machine.state == .readingHead(deadline: done + Self.headerTimeout, peerEnded: false))
        #expect(machine.isHTTP && !machine.isHandshaking)
        #expect(machine.sweep(at: done + Self.headerTimeout - 1) == .none)
        #expect(machine.handshakeCompleted(now: done) == .none, "only a handshaking connection completes a handshake")
        var silent = machine
        #expect(silent.sweep(at: done + Self.headerTimeout) == .closeIdle)
        var partial = machine
        #expect(partial.sweep(at: done + Self.headerTimeout, inputPending: true) == .answer408AndClose)
        #expect(machine.headReceived() == .startExchange)
    }

    @Test func aRefusedHandshakeSendsTheQueuedAlertThenCloses() {
        var (machine, _) = Self.handshaking()
        #expect(machine.handshakeRefused() == .close(.afterFlush))
        #expect(machine.state == .closed)
        #expect(machine.handshakeRefused() == .none)
    }

    @Test(arguments: [false, true])
    func aClientThatClosesMidHandshakeIsClosed(failed: Bool) {
        var (machine, _) = Self.handshaking()
        #expect(machine.peerClosed(failed: failed, requestComplete: true) == (failed ? .close(.immediately) : .close(.afterFlush)))
        #expect(machine.state == .closed)
    }

    /// The events of an HTTP connection find no request here: none of them may answer one.
    @Test func noHTTPEventAnswersAHandshakingConnection() {
        var (machine, _) = Self.handshaking()
        let before = machine.state
        #expect(machine.requestMalformed(responseStarted: false) == .none)
        #expect(machine.headReceived() == .none)
        #expect(machine.needMoreInput(now: Self.acceptedTunnel + 1, inputBuffered: true) == .none)
        #expect(machine.exchangeFinished(now: Self.acceptedTunnel + 1, keepAlive: true, inputBuffered: true) == .none)
        #expect(machine.bodyCanFlow(bodyWanted: true) == .none)
        #expect(machine.inputBackedUp() == .none)
        #expect(machine.tunnelRequested() == .none)
        #expect(machine.tunnelFailed() == .none)
        #expect(machine.outputDrained() == .none)
        #expect(machine.state == before)
    }

    @Test func shutdownClosesAHandshakingConnectionAtOnce() {
        for inputPending in [false, true] {
            var (machine, _) = Self.handshaking()
            #expect(machine.shutdownBegan(inputPending: inputPending) == .closeIdle)
            #expect(machine.state == .closed)
        }
    }

    @Test func onlyAConnectExchangeCanBecomeAnInterceptedHandshake() {
        var idle = Machine(now: Self.accepted, headerTimeout: Self.headerTimeout, idleTimeout: Self.idleTimeout)
        #expect(idle.interceptedTunnelAccepted(now: Self.acceptedTunnel, inputBuffered: false) == .none)
        #expect(idle.state == .readingHead(deadline: Self.accepted + Self.headerTimeout, peerEnded: false))
    }
}
