import OutboxHTTP
@testable import OutboxProxy
import Testing

/// The exchange lifecycle driven by events: no sockets, no upstream.
@Suite("Exchange state machine: continue, retry, store instead, framing, ending")
struct ExchangeStateMachineTests {
    typealias Machine = ExchangeStateMachine
    typealias Action = ExchangeStateMachine.Action

    /// A machine for a request with a body still to come (or none), whose call has started.
    static func forwarding(complete: Bool = false, expectsContinue: Bool = false, isHead: Bool = false,
                           http11: Bool = true) -> (Machine, Action) {
        var machine = Machine(requestComplete: complete, isHead: isHead, clientSpeaksHTTP11: http11)
        machine.headParsed(expectsContinue: expectsContinue)
        let started = machine.callStarted()
        return (machine, started)
    }

    // MARK: 100 Continue

    struct ContinueCase: CustomTestStringConvertible, Sendable {
        let name: String
        let complete: Bool
        let expects: Bool
        let http11: Bool
        let continues: Int
        var testDescription: String { name }
    }

    static let continueCases: [ContinueCase] = [
        .init(name: "asked, body to come", complete: false, expects: true, http11: true, continues: 1),
        .init(name: "asked, request complete", complete: true, expects: true, http11: true, continues: 0),
        .init(name: "asked by an HTTP/1.0 client", complete: false, expects: true, http11: false, continues: 0),
        .init(name: "not asked", complete: false, expects: false, http11: true, continues: 0),
    ]

    /// Continue goes out when the call starts, once, even when the call is sent again.
    @Test(arguments: continueCases)
    func continueIsSentAtMostOnceOnForward(_ c: ContinueCase) {
        var machine = Machine(requestComplete: c.complete, isHead: false, clientSpeaksHTTP11: c.http11)
        machine.headParsed(expectsContinue: c.expects)
        var actions = [machine.callStarted()]
        let retry = machine.upstreamFailed(retryable: true, replayable: true, unreachable: false, bodyCopyWhole: true)
        #expect(retry == .resendOnNewConnection)
        actions.append(machine.callStarted())
        #expect(actions.filter { $0 == .sendContinue }.count == c.continues)
        #expect(actions.contains(.finishUpstreamBody) == c.complete)
    }

    /// A request whose body is read whole (for the queue or the admin API) gets its Continue
    /// when the body is wanted, and a queueable one not again when it is forwarded afterwards.
    @Test(arguments: continueCases, [Machine.Reader.queue, .admin])
    func continueIsSentAtMostOnceForAWholeBody(_ c: ContinueCase, reader: Machine.Reader) {
        var machine = Machine(requestComplete: c.complete, isHead: false, clientSpeaksHTTP11: c.http11)
        machine.headParsed(expectsContinue: c.expects)
        var actions = [machine.readWholeBody(for: reader)]
        if !c.complete {
            #expect(machine.requestBody() == .bufferBody)
            actions.append(machine.requestEnded())
        }
        #expect(actions.last == .decide(reader))
        if reader == .queue { actions.append(machine.callStarted()) }
        #expect(actions.filter { $0 == .sendContinue }.count == c.continues)
    }

    // MARK: Retry on a stale pooled connection

    struct RetryCase: CustomTestStringConvertible, Sendable {
        let name: String
        let retryable: Bool
        let replayable: Bool
        let queueable: Bool
        let bodyCopyWhole: Bool
        let resends: Bool
        var testDescription: String { name }
    }

    static let retryCases: [RetryCase] = [
        .init(name: "replayable, body whole", retryable: true, replayable: true, queueable: false, bodyCopyWhole: true,
              resends: true),
        .init(name: "queueable (carries a key)", retryable: true, replayable: false, queueable: true,
              bodyCopyWhole: true, resends: true),
        .init(name: "not replayable (POST without key)", retryable: true, replayable: false, queueable: false,
              bodyCopyWhole: true, resends: false),
        .init(name: "body copy no longer whole", retryable: true, replayable: true, queueable: false,
              bodyCopyWhole: false, resends: false),
        .init(name: "not a stale-connection failure", retryable: false, replayable: true, queueable: false,
              bodyCopyWhole: true, resends: false),
    ]

    @Test(arguments: retryCases)
    func staleConnectionIsRetriedOnceWhenSafe(_ c: RetryCase) {
        var machine = Machine(requestComplete: !c.queueable, isHead: false, clientSpeaksHTTP11: true)
        if c.queueable {
            #expect(machine.readWholeBody(for: .queue) == .none)
            #expect(machine.requestEnded() == .decide(.queue))
        }
        #expect(machine.callStarted() == .finishUpstreamBody)
        let first = machine.upstreamFailed(retryable: c.retryable, replayable: c.replayable, unreachable: false,
                                           bodyCopyWhole: c.bodyCopyWhole)
        #expect(first == (c.resends ? .resendOnNewConnection : .fail))
        guard c.resends else { return }
        #expect(machine.callStarted() == .finishUpstreamBody)
        // The second stale connection is the origin's answer: never a third attempt.
        let second = machine.upstreamFailed(retryable: true, replayable: c.replayable, unreachable: false,
                                            bodyCopyWhole: true)
        #expect(second == .fail)
    }

    @Test(arguments: [false, true])
    func failureAfterTheResponseHeadCutsTheConnection(retryable: Bool) {
        var (machine, _) = Self.forwarding(complete: true)
        #expect(machine.upstreamHead(status: 200, framing: .contentLength(10), unavailable: false, keepAlive: true)
            == .relayHead(chunked: false))
        #expect(machine.upstreamFailed(retryable: retryable, replayable: true, unreachable: true, bodyCopyWhole: true)
            == .cut)
        #expect(machine.state == .finished)
    }

    // MARK: Store instead

    struct StoreCase: CustomTestStringConvertible, Sendable {
        let name: String
        let queueable: Bool
        let unreachable: Bool
        let expected: Action
        var testDescription: String { name }
    }

    static let storeCases: [StoreCase] = [
        .init(name: "queueable, unreachable", queueable: true, unreachable: true, expected: .storeInstead),
        .init(name: "queueable, other failure", queueable: true, unreachable: false, expected: .fail),
        .init(name: "not queueable, unreachable", queueable: false, unreachable: true, expected: .fail),
    ]

    @Test(arguments: storeCases)
    func unreachableQueueableRequestIsStoredInstead(_ c: StoreCase) {
        var machine = Machine(requestComplete: true, isHead: false, clientSpeaksHTTP11: true)
        if c.queueable { #expect(machine.readWholeBody(for: .queue) == .decide(.queue)) }
        _ = machine.callStarted()
        let action = machine.upstreamFailed(retryable: false, replayable: false, unreachable: c.unreachable,
                                            bodyCopyWhole: true)
        #expect(action == c.expected)
        #expect(machine.isStoring == (c.expected == .storeInstead))
    }

    @Test(arguments: [false, true])
    func unavailableStatusStoresOnlyAQueueableRequest(queueable: Bool) {
        var machine = Machine(requestComplete: true, isHead: false, clientSpeaksHTTP11: true)
        if queueable { _ = machine.readWholeBody(for: .queue) }
        _ = machine.callStarted()
        let action = machine.upstreamHead(status: 503, framing: .contentLength(5), unavailable: true, keepAlive: true)
        #expect(action == (queueable ? .storeInstead : .relayHead(chunked: false)))
    }

    // MARK: Early response

    /// The origin answers while the body still streams: the body keeps flowing to the call
    /// until the response ends, then the rest is dropped and the request's end finishes it.
    @Test func earlyResponseDrainsTheRestOfTheBody() {
        var (machine, _) = Self.forwarding()
        #expect(machine.requestBody() == .forwardBody)
        #expect(machine.bodyGate == .upstream)
        #expect(machine.upstreamHead(status: 413, framing: .contentLength(0), unavailable: false, keepAlive: false)
            == .relayHead(chunked: false))
        #expect(machine.requestBody() == .forwardBody)
        #expect(machine.upstreamEnded() == .drainRequest(lastChunk: false))
        #expect(!machine.requestComplete)
        #expect(machine.bodyGate == .open)
        #expect(machine.requestBody() == .none)
        #expect(machine.requestEnded() == .finish(keepAlive: false))
        #expect(machine.state == .finished)
    }

    @Test func responseAfterTheWholeRequestFinishes() {
        var (machine, _) = Self.forwarding()
        #expect(machine.requestEnded() == .finishUpstreamBody)
        _ = machine.upstreamHead(status: 200, framing: .chunked, unavailable: false, keepAlive: true)
        #expect(machine.upstreamBody() == .relayBody(chunked: true))
        #expect(machine.upstreamEnded() == .finishResponse(lastChunk: true, keepAlive: true))
    }

    // MARK: Response framing

    struct FramingCase: CustomTestStringConvertible, Sendable {
        let name: String
        let status: Int
        let framing: HTTPBodyFraming
        let isHead: Bool
        let http11: Bool
        let chunked: Bool
        let hasBody: Bool
        var testDescription: String { name }
    }

    static let framingCases: [FramingCase] = [
        .init(name: "length", status: 200, framing: .contentLength(3), isHead: false, http11: true, chunked: false,
              hasBody: true),
        .init(name: "chunked", status: 200, framing: .chunked, isHead: false, http11: true, chunked: true, hasBody: true),
        .init(name: "close-delimited to HTTP/1.1", status: 200, framing: .untilClose, isHead: false, http11: true,
              chunked: true, hasBody: true),
        .init(name: "close-delimited to HTTP/1.0", status: 200, framing: .untilClose, isHead: false, http11: false,
              chunked: false, hasBody: true),
        .init(name: "HEAD", status: 200, framing: .contentLength(3), isHead: true, http11: true, chunked: false,
              hasBody: false),
        .init(name: "HEAD, chunked headers", status: 200, framing: .chunked, isHead: true, http11: true,
              chunked: false, hasBody: false),
        .init(name: "204", status: 204, framing: .none, isHead: false, http11: true, chunked: false, hasBody: false),
        .init(name: "304 with length headers", status: 304, framing: .contentLength(3), isHead: false, http11: true,
              chunked: false, hasBody: false),
    ]

    @Test(arguments: framingCases)
    func responseFramingToTheClient(_ c: FramingCase) {
        var (machine, _) = Self.forwarding(complete: true, isHead: c.isHead, http11: c.http11)
        #expect(machine.upstreamHead(status: c.status, framing: c.framing, unavailable: false, keepAlive: true)
            == .relayHead(chunked: c.chunked))
        #expect(machine.upstreamBody() == (c.hasBody ? .relayBody(chunked: c.chunked) : .none))
        #expect(machine.upstreamEnded() == .finishResponse(lastChunk: c.chunked, keepAlive: true))
    }

    // MARK: Ending

    /// Every event after the end is ignored.
    @Test(arguments: ["answered", "aborted", "cut", "response ended"])
    func finishedIsTerminal(_ ending: String) {
        var (machine, _) = Self.forwarding(complete: true)
        switch ending {
        case "answered":
            machine.end()
        case "aborted":
            #expect(machine.abort() == .cancelCall)
        case "cut":
            _ = machine.upstreamHead(status: 200, framing: .chunked, unavailable: false, keepAlive: true)
            #expect(machine.upstreamFailed(retryable: true, replayable: true, unreachable: false, bodyCopyWhole: true)
                == .cut)
        default:
            _ = machine.upstreamHead(status: 200, framing: .chunked, unavailable: false, keepAlive: true)
            _ = machine.upstreamEnded()
        }
        #expect(machine.state == .finished)
        #expect(machine.requestBody() == .none)
        #expect(machine.requestEnded() == .none)
        #expect(machine.callStarted() == .none)
        #expect(machine.readWholeBody(for: .queue) == .none)
        #expect(machine.upstreamHead(status: 200, framing: .chunked, unavailable: true, keepAlive: true) == .none)
        #expect(machine.upstreamBody() == .none)
        #expect(machine.upstreamEnded() == .none)
        #expect(machine.upstreamFailed(retryable: true, replayable: true, unreachable: true, bodyCopyWhole: true)
            == .none)
        #expect(machine.clientDrained() == .none)
        #expect(machine.abort() == .none)
        machine.beginStoring()
        machine.awaitConnection()
        #expect(machine.state == .finished)
    }

    /// An admin answer streamed as the client reads (an operation's view): its head is out, a
    /// drained output asks for more, nothing of the upstream side applies, and an abort ends it.
    @Test func aStreamedAdminAnswerResumesOnDrainAndEndsOnAbort() {
        var machine = Machine(requestComplete: true, isHead: false, clientSpeaksHTTP11: true)
        #expect(machine.readWholeBody(for: .admin) == .decide(.admin))
        machine.beginStoring()
        #expect(!machine.responseStarted)
        machine.beginAnswering()
        #expect(machine.state == .answering)
        #expect(machine.responseStarted && machine.requestComplete && machine.bodyGate == .open)
        #expect(machine.clientDrained() == .resumeResponse)
        #expect(machine.requestBody() == .none)
        #expect(machine.requestEnded() == .none)
        #expect(machine.callStarted() == .none)
        #expect(machine.upstreamHead(status: 200, framing: .chunked, unavailable: false, keepAlive: true) == .none)
        #expect(machine.upstreamFailed(retryable: true, replayable: true, unreachable: true, bodyCopyWhole: true) == .none)
        #expect(machine.state == .answering)
        #expect(machine.abort() == .cancelCall)
        #expect(machine.state == .finished && machine.clientDrained() == .none)
        // Only a waiting exchange starts answering.
        machine.beginAnswering()
        #expect(machine.state == .finished)
    }

    /// Before a call the body waits (unless it is read for the queue); a complete request never waits.
    @Test func bodyGateBeforeTheCall() {
        var waiting = Machine(requestComplete: false, isHead: false, clientSpeaksHTTP11: true)
        #expect(waiting.bodyGate == .closed)
        _ = waiting.readWholeBody(for: .queue)
        #expect(waiting.bodyGate == .open)
        let complete = Machine(requestComplete: true, isHead: false, clientSpeaksHTTP11: true)
        #expect(complete.bodyGate == .open)
    }
}
