@testable import OutboxProxy
import Testing

/// The connection lifecycle driven by events and a manual clock: no sockets, no sleeping.
@Suite("Client connection state machine: phases, timeouts, closes")
struct ClientConnectionStateMachineTests {
    typealias Machine = ClientConnectionStateMachine
    typealias Action = ClientConnectionStateMachine.Action

    static let second: UInt64 = 1_000_000_000
    static let headerTimeout = 10 * second
    static let idleTimeout = 60 * second
    /// When the connection was accepted (any nonzero monotonic time).
    static let accepted = 5_000 * second
    /// When the first exchange of ``machine(in:)`` starts and finishes.
    static let headAt = accepted + second
    static let finishedAt = accepted + 2 * second

    enum Phase: String, CaseIterable, CustomTestStringConvertible {
        case readingHead, idle, exchanging, pipelinePaused, tunnelling, closed
        var testDescription: String { rawValue }
    }

    /// A machine brought into `phase` through the events that lead there.
    static func machine(in phase: Phase) -> Machine {
        var machine = Machine(now: accepted, headerTimeout: headerTimeout, idleTimeout: idleTimeout)
        switch phase {
        case .readingHead:
            break
        case .exchanging:
            _ = machine.headReceived()
        case .pipelinePaused:
            _ = machine.headReceived()
            _ = machine.inputBackedUp()
        case .idle:
            _ = machine.headReceived()
            _ = machine.exchangeFinished(now: finishedAt, keepAlive: true, inputBuffered: false)
        case .tunnelling:
            _ = machine.headReceived()
            _ = machine.tunnelRequested()
        case .closed:
            _ = machine.abandon()
        }
        return machine
    }

    static let idleDeadline = finishedAt + idleTimeout
    static let headerDeadline = accepted + headerTimeout

    // MARK: Header timeout

    @Test("the header timeout fires exactly at its deadline, answers 408 and closes")
    func headerTimeoutFiresAtDeadline() {
        var machine = Self.machine(in: .readingHead)
        #expect(machine.needMoreInput(now: Self.accepted + Self.second, inputBuffered: true) == .none)
        #expect(machine.sweep(at: Self.headerDeadline - 1, inputPending: true) == .none)
        #expect(machine.state == .readingHead(deadline: Self.headerDeadline, peerEnded: false))
        #expect(machine.sweep(at: Self.headerDeadline, inputPending: true) == .answer408AndClose)
        #expect(machine.state == .closed)
        #expect(machine.sweep(at: Self.headerDeadline + Self.second, inputPending: true) == .none)
    }

    @Test("a connection that never sent a byte is closed at the header deadline without an answer")
    func silentConnectionClosesWithoutAnswer() {
        var machine = Self.machine(in: .readingHead)
        #expect(machine.sweep(at: Self.headerDeadline - 1) == .none)
        #expect(machine.sweep(at: Self.headerDeadline) == .closeIdle)
        #expect(machine.state == .closed)
    }

    @Test("a head completing before the deadline cancels the header timeout")
    func headBeforeDeadlineCancelsTimeout() {
        var machine = Self.machine(in: .readingHead)
        #expect(machine.headReceived() == .startExchange)
        // Waiting on the upstream, not on the client: no timeout applies, however long.
        #expect(machine.sweep(at: Self.headerDeadline) == .none)
        #expect(machine.sweep(at: Self.headerDeadline + 100 * Self.idleTimeout, lastProgress: Self.headAt) == .none)
        #expect(machine.state == .exchanging(pipelinePaused: false, peerEnded: false))
    }

    // MARK: Idle timeout

    @Test("an idle keep-alive connection closes only once the idle timeout passed with no exchange")
    func idleTimeoutClosesIdleConnection() {
        var machine = Self.machine(in: .idle)
        #expect(machine.state == .idle(deadline: Self.idleDeadline, peerEnded: false))
        // The header deadline of the first request no longer applies.
        #expect(machine.sweep(at: Self.headerDeadline) == .none)
        #expect(machine.sweep(at: Self.idleDeadline - 1) == .none)
        #expect(machine.sweep(at: Self.idleDeadline) == .closeIdle)
        #expect(machine.state == .closed)
    }

    @Test("a new request before the idle deadline keeps the connection past it")
    func requestBeforeIdleDeadlineKeepsConnection() {
        var machine = Self.machine(in: .idle)
        #expect(machine.headReceived() == .startExchange)
        #expect(machine.sweep(at: Self.idleDeadline, lastProgress: Self.idleDeadline - 1) == .none)
        #expect(machine.exchangeFinished(now: Self.idleDeadline + 1, keepAlive: true, inputBuffered: false) == .none)
        #expect(machine.sweep(at: Self.idleDeadline + Self.idleTimeout) == .none)
        #expect(machine.sweep(at: Self.idleDeadline + 1 + Self.idleTimeout) == .closeIdle)
    }

    @Test("the first bytes of the next request switch from the idle clock to the header clock")
    func firstBytesStartHeaderClock() {
        var machine = Self.machine(in: .idle)
        let firstBytes = Self.idleDeadline - 5 * Self.second
        #expect(machine.needMoreInput(now: firstBytes, inputBuffered: false) == .none)
        #expect(machine.state == .idle(deadline: Self.idleDeadline, peerEnded: false))
        #expect(machine.needMoreInput(now: firstBytes, inputBuffered: true) == .none)
        #expect(machine.state == .readingHead(deadline: firstBytes + Self.headerTimeout, peerEnded: false))
        #expect(machine.sweep(at: Self.idleDeadline, inputPending: true) == .none)
        #expect(machine.sweep(at: firstBytes + Self.headerTimeout, inputPending: true) == .answer408AndClose)
    }

    // MARK: Stalled clients

    struct StallCase: Sendable, CustomTestStringConvertible {
        let name: String
        let awaitingRequestBody: Bool
        let responseUnread: Bool
        let stalls: Bool
        var testDescription: String { name }
    }

    @Test("a client that stops sending its body or reading its response is closed as stalled after the idle timeout",
          arguments: [
              StallCase(name: "not sending its body", awaitingRequestBody: true, responseUnread: false, stalls: true),
              StallCase(name: "not reading its response", awaitingRequestBody: false, responseUnread: true, stalls: true),
              StallCase(name: "both", awaitingRequestBody: true, responseUnread: true, stalls: true),
              StallCase(name: "waiting on the upstream", awaitingRequestBody: false, responseUnread: false, stalls: false),
          ])
    func stalledClientIsClosed(_ stall: StallCase) {
        var machine = Self.machine(in: .exchanging)
        let progress = Self.headAt + 3 * Self.second
        // Measured from the last byte moved, not from the start of the exchange.
        #expect(machine.sweep(at: progress + Self.idleTimeout, awaitingRequestBody: stall.awaitingRequestBody,
                              responseUnread: stall.responseUnread, lastProgress: progress) == .none)
        let late = machine.sweep(at: progress + Self.idleTimeout + 1, awaitingRequestBody: stall.awaitingRequestBody,
                                 responseUnread: stall.responseUnread, lastProgress: progress)
        #expect(late == (stall.stalls ? .closeStalled : .none))
        #expect((machine.state == .closed) == stall.stalls)
    }

    @Test("a paused body is not the client's stall: it waits for the upstream")
    func pausedPipelineIsNotStalled() {
        var machine = Self.machine(in: .pipelinePaused)
        #expect(machine.sweep(at: Self.headAt + 10 * Self.idleTimeout, lastProgress: Self.headAt) == .none)
    }

    // MARK: Pipelining and backpressure

    @Test("pipelined exchanges run one after another on the same connection")
    func pipelinedExchangesKeepConnection() {
        var machine = Self.machine(in: .exchanging)
        #expect(machine.exchangeFinished(now: Self.finishedAt, keepAlive: true, inputBuffered: true) == .parseInput)
        #expect(machine.state == .idle(deadline: Self.idleDeadline, peerEnded: false))
        #expect(machine.headReceived() == .startExchange)
        #expect(machine.exchangeFinished(now: Self.finishedAt + 1, keepAlive: true, inputBuffered: true) == .parseInput)
        #expect(machine.headReceived() == .startExchange)
        #expect(machine.exchangeFinished(now: Self.finishedAt + 2, keepAlive: true, inputBuffered: false) == .none)
        #expect(machine.state == .idle(deadline: Self.finishedAt + 2 + Self.idleTimeout, peerEnded: false))
    }

    @Test("backed-up input pauses reading once; the finished exchange resumes it for the next request")
    func backedUpInputPausesUntilExchangeFinishes() {
        var machine = Self.machine(in: .exchanging)
        #expect(machine.inputBackedUp() == .pauseReading)
        #expect(machine.inputBackedUp() == .none)
        #expect(machine.state == .exchanging(pipelinePaused: true, peerEnded: false))
        #expect(machine.exchangeFinished(now: Self.finishedAt, keepAlive: true, inputBuffered: true) == .resumeReading)
        #expect(machine.state == .idle(deadline: Self.idleDeadline, peerEnded: false))
        #expect(machine.inputBackedUp() == .none)
    }

    @Test("a body that may flow again resumes a paused pipeline, else parses what is buffered")
    func bodyCanFlowResumesOrParses() {
        var paused = Self.machine(in: .pipelinePaused)
        #expect(paused.bodyCanFlow(bodyWanted: false) == .parseInput)
        #expect(paused.state == .exchanging(pipelinePaused: true, peerEnded: false))
        #expect(paused.bodyCanFlow(bodyWanted: true) == .resumeReading)
        #expect(paused.state == .exchanging(pipelinePaused: false, peerEnded: false))
        #expect(paused.bodyCanFlow(bodyWanted: true) == .parseInput)
        var tunnel = Self.machine(in: .tunnelling)
        #expect(tunnel.bodyCanFlow(bodyWanted: true) == .none)
    }

    @Test("an exchange that does not keep the connection alive closes it after its response")
    func noKeepAliveClosesAfterFlush() {
        var machine = Self.machine(in: .exchanging)
        #expect(machine.exchangeFinished(now: Self.finishedAt, keepAlive: false, inputBuffered: true) == .close(.afterFlush))
        #expect(machine.state == .closed)
    }

    @Test("a parse pass asked for during a pass runs after it, not inside it")
    func reentrantParseRunsAgainAfterPass() {
        var machine = Self.machine(in: .readingHead)
        var answers: [Bool] = []
        answers.append(machine.beginParsing())
        answers.append(machine.beginParsing())
        answers.append(machine.beginParsing())
        answers.append(machine.parsePassEnded())
        answers.append(machine.parsePassEnded())
        #expect(answers == [true, false, false, true, false])
        #expect(machine.pass == .idle)
        // A pass that ended the connection does not run again.
        answers = [machine.beginParsing(), machine.beginParsing()]
        _ = machine.requestMalformed(responseStarted: false)
        answers.append(machine.parsePassEnded())
        #expect(answers == [true, false, false])
        #expect(machine.pass == .idle)
    }

    // MARK: Peer close

    struct PeerCloseCase: Sendable, CustomTestStringConvertible {
        let phase: Phase
        let failed: Bool
        let requestComplete: Bool
        let action: Action
        let state: Machine.State
        var testDescription: String {
            "\(phase.rawValue), \(failed ? "read error" : "EOF")\(requestComplete ? "" : ", request incomplete")"
        }
    }

    @Test("the peer closing is answered per phase", arguments: [
        PeerCloseCase(phase: .readingHead, failed: false, requestComplete: true, action: .parseRemainingInput,
                      state: .readingHead(deadline: ClientConnectionStateMachineTests.headerDeadline, peerEnded: true)),
        PeerCloseCase(phase: .readingHead, failed: true, requestComplete: true, action: .close(.immediately), state: .closed),
        PeerCloseCase(phase: .idle, failed: false, requestComplete: true, action: .parseRemainingInput,
                      state: .idle(deadline: ClientConnectionStateMachineTests.idleDeadline, peerEnded: true)),
        PeerCloseCase(phase: .idle, failed: true, requestComplete: true, action: .close(.immediately), state: .closed),
        PeerCloseCase(phase: .exchanging, failed: false, requestComplete: true, action: .none,
                      state: .exchanging(pipelinePaused: false, peerEnded: true)),
        PeerCloseCase(phase: .pipelinePaused, failed: false, requestComplete: true, action: .none,
                      state: .exchanging(pipelinePaused: true, peerEnded: true)),
        PeerCloseCase(phase: .exchanging, failed: false, requestComplete: false, action: .close(.immediately), state: .closed),
        PeerCloseCase(phase: .exchanging, failed: true, requestComplete: true, action: .close(.immediately), state: .closed),
        PeerCloseCase(phase: .tunnelling, failed: false, requestComplete: true, action: .relayEnded, state: .tunnelling),
        PeerCloseCase(phase: .closed, failed: false, requestComplete: true, action: .none, state: .closed),
    ])
    func peerClosePerPhase(_ test: PeerCloseCase) {
        var machine = Self.machine(in: test.phase)
        #expect(machine.peerClosed(failed: test.failed, requestComplete: test.requestComplete) == test.action)
        #expect(machine.state == test.state)
    }

    @Test("after EOF between requests, nothing more can come: the connection closes after flush")
    func eofBetweenRequestsCloses() {
        for phase in [Phase.readingHead, .idle] {
            var machine = Self.machine(in: phase)
            #expect(machine.remainingInputParsed() == .none, "\(phase): no EOF yet")
            #expect(machine.peerClosed(failed: false, requestComplete: true) == .parseRemainingInput)
            #expect(machine.remainingInputParsed() == .close(.afterFlush), "\(phase)")
            #expect(machine.state == .closed)
        }
    }

    @Test("a half-closed client still gets the responses to what it sent, then the connection closes")
    func halfClosedClientGetsItsResponses() {
        var machine = Self.machine(in: .readingHead)
        #expect(machine.peerClosed(failed: false, requestComplete: true) == .parseRemainingInput)
        // The last bytes held two pipelined requests.
        #expect(machine.headReceived() == .startExchange)
        #expect(machine.exchangeFinished(now: Self.finishedAt, keepAlive: true, inputBuffered: true) == .parseInput)
        #expect(machine.headReceived() == .startExchange)
        #expect(machine.exchangeFinished(now: Self.finishedAt, keepAlive: true, inputBuffered: false) == .close(.afterFlush))
        #expect(machine.state == .closed)
    }

    @Test("a half-closed client's partial next request can never complete: the connection closes")
    func halfClosedPartialRequestCloses() {
        var machine = Self.machine(in: .exchanging)
        #expect(machine.peerClosed(failed: false, requestComplete: true) == .none)
        #expect(machine.exchangeFinished(now: Self.finishedAt, keepAlive: true, inputBuffered: true) == .parseInput)
        #expect(machine.needMoreInput(now: Self.finishedAt, inputBuffered: true) == .close(.afterFlush))
        #expect(machine.state == .closed)
    }

    // MARK: Errors, tunnels, shutdown

    @Test("a malformed request is answered with its error unless its response has begun")
    func malformedRequest() {
        for phase in [Phase.readingHead, .idle, .exchanging] {
            var machine = Self.machine(in: phase)
            #expect(machine.requestMalformed(responseStarted: false) == .answerErrorAndClose, "\(phase)")
            #expect(machine.state == .closed)
        }
        var responding = Self.machine(in: .exchanging)
        #expect(responding.requestMalformed(responseStarted: true) == .close(.immediately))
        #expect(responding.state == .closed)
    }

    @Test("a tunnel relays the client's events, has no timeouts, and closes after flush when done")
    func tunnelLifecycle() {
        var machine = Self.machine(in: .tunnelling)
        #expect(machine.state == .tunnelling)
        #expect(!machine.isHTTP)
        #expect(machine.bytesReadable() == .relayReadable)
        #expect(machine.outputDrained() == .relayDrained)
        #expect(machine.sweep(at: Self.accepted + 100 * Self.idleTimeout, inputPending: true, awaitingRequestBody: true,
                              responseUnread: true, lastProgress: Self.accepted) == .none)
        #expect(machine.shutdownBegan(inputPending: false) == .none)
        #expect(machine.tunnelEnded() == .close(.afterFlush))
        #expect(machine.state == .closed)
        #expect(machine.tunnelEnded() == .none)

        var failing = Self.machine(in: .tunnelling)
        #expect(failing.tunnelFailed() == .answerErrorAndClose)
        #expect(failing.state == .closed)
        #expect(failing.tunnelFailed() == .none)
    }

    @Test("only an exchange can become a tunnel")
    func tunnelOnlyFromExchange() {
        for phase in [Phase.readingHead, .idle, .tunnelling, .closed] {
            var machine = Self.machine(in: phase)
            let before = machine.state
            #expect(machine.tunnelRequested() == .none, "\(phase)")
            #expect(machine.state == before)
        }
        var machine = Self.machine(in: .exchanging)
        #expect(machine.tunnelRequested() == .startTunnel)
    }

    @Test("shutdown closes a connection with no request in progress and leaves busy ones to finish",
          arguments: Phase.allCases)
    func shutdownPerPhase(_ phase: Phase) {
        for inputPending in [false, true] {
            var machine = Self.machine(in: phase)
            let before = machine.state
            let closesNow = (phase == .readingHead || phase == .idle) && !inputPending
            #expect(machine.shutdownBegan(inputPending: inputPending) == (closesNow ? .closeIdle : .none))
            #expect(machine.state == (closesNow ? .closed : before))
        }
    }

    @Test("routing of reads and drains per phase", arguments: Phase.allCases)
    func readsAndDrainsPerPhase(_ phase: Phase) {
        var machine = Self.machine(in: phase)
        let read: Action = switch phase {
        case .readingHead, .idle, .exchanging, .pipelinePaused: .parseInput
        case .tunnelling: .relayReadable
        case .closed: .none
        }
        let drained: Action = switch phase {
        case .exchanging, .pipelinePaused: .resumeResponse
        case .tunnelling: .relayDrained
        case .readingHead, .idle, .closed: .none
        }
        #expect(machine.bytesReadable() == read)
        #expect(machine.outputDrained() == drained)
    }

    @Test("a closed connection stays closed; only abandoning it still releases the socket")
    func closedAbsorbsEvents() {
        var machine = Self.machine(in: .closed)
        let far = Self.accepted + 100 * Self.idleTimeout
        #expect(machine.headReceived() == .none)
        #expect(machine.needMoreInput(now: far, inputBuffered: true) == .none)
        #expect(machine.exchangeFinished(now: far, keepAlive: true, inputBuffered: true) == .none)
        #expect(machine.bodyCanFlow(bodyWanted: true) == .none)
        #expect(machine.inputBackedUp() == .none)
        #expect(machine.requestMalformed(responseStarted: false) == .none)
        #expect(machine.responseAborted() == .none)
        #expect(machine.sweep(at: far, inputPending: true, awaitingRequestBody: true, responseUnread: true,
                              lastProgress: Self.accepted) == .none)
        #expect(machine.state == .closed)
        #expect(machine.abandon() == .close(.immediately))
        #expect(machine.state == .closed)
    }

    @Test("an aborted response closes after what is queued is sent")
    func abortedResponseClosesAfterFlush() {
        var machine = Self.machine(in: .exchanging)
        #expect(machine.responseAborted() == .close(.afterFlush))
        #expect(machine.state == .closed)
    }
}

extension ClientConnectionStateMachine {
    /// A timer sweep with nothing pending unless a test says so.
    mutating func sweep(at now: UInt64, inputPending: Bool = false, awaitingRequestBody: Bool = false,
                        responseUnread: Bool = false, lastProgress: UInt64 = 0) -> Action {
        tick(now: now, inputPending: inputPending, awaitingRequestBody: awaitingRequestBody,
             responseUnread: responseUnread, lastProgress: lastProgress)
    }
}
