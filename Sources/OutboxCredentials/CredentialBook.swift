import Foundation
import OutboxConfig
import OutboxHTTP
import OutboxModel
import OutboxTelemetry
import Synchronization

/// What replay sends an origin's operations with (SPEC §10): header values that replace the
/// stored ones of the same names, the stored request itself unchanged.
public enum CredentialAnswer: Sendable, Equatable {
    /// No rule and no values set by hand: the stored headers go as they are.
    case none
    /// These fields replace the stored fields of the same names (names lowercased).
    case headers([(name: String, value: String)])
    /// The rule's source could not give any (`reason`); `failures` in a row so far, for the
    /// backoff before the next try. Nothing is sent.
    case failed(reason: String, failures: Int)

    public static func == (lhs: CredentialAnswer, rhs: CredentialAnswer) -> Bool {
        switch (lhs, rhs) {
        case (.none, .none): true
        case (.headers(let a), .headers(let b)): a.map { "\($0.name)=\($0.value)" } == b.map { "\($0.name)=\($0.value)" }
        case (.failed(let a, let n), .failed(let b, let m)): a == b && n == m
        default: false
        }
    }
}

/// Where the replayer gets credentials for an origin at send time, and tells of a refusal.
public protocol CredentialSource: Sendable {
    /// The credentials an operation of `origin` is sent with now.
    func answer(for origin: Origin) async -> CredentialAnswer
    /// `origin` refused the credentials an attempt carried (a status in `authStatuses`): a
    /// command's cached answer is not used again.
    func refused(_ origin: Origin)
}

/// One instance's credentials for replay (SPEC §10): values set by hand through the admin API
/// (in memory only), values learnt from clients (`from: "client"`, kept in `dataDirectory`),
/// and a command's answers (`from: "command"`, cached until they expire or are refused).
/// Precedence: set by hand, then the rule's source, then the stored request's own values.
///
/// Learning costs one Boolean load per request when no rule learns from clients; otherwise, on
/// a connection that sends what it sent before, a comparison of bytes (`LearningMemo`); a new
/// value takes the lock and changes the file on a queue of its own. Values never reach a log
/// line, an event or an admin view.
public final class CredentialBook: CredentialSource, Sendable {
    private let rules: [CredentialRule]
    private let learnsFromClients: Bool
    private let logger: Logger
    private let runner: CommandRunner
    private let file: CredentialFile?
    private let state = Mutex(State())
    /// Bumped (under `state`'s lock) each time a client's values are learnt: a connection's
    /// `LearningMemo` from an older generation is looked at again.
    private let learnings = Atomic<UInt64>(0)
    private let changed = Mutex<(@Sendable (Origin) -> Void)?>(nil)

    private struct State {
        var byHand: [Origin: [(name: String, value: String)]] = [:]
        var learnt: [Origin: [(name: String, value: String)]] = [:]
        var commands: [Origin: CommandState] = [:]
        /// Each origin's rule, looked up once.
        var ruleIndex: [Origin: Int?] = [:]
    }

    /// A command's last answer for one origin, and the run under way if any.
    private struct CommandState {
        var headers: [(name: String, value: String)]?
        var expiresAt: Int64?
        var failures = 0
        var lastFailure: String?
        /// The values an origin refused last: a new answer that brings the same ones is no news.
        var refused: [String]?
        /// When the origin last refused the command's values (ms since the epoch).
        var refusedAt: Int64?
        var waiters: [CheckedContinuation<CredentialAnswer, Never>]?
    }

    /// - Parameter directory: where learnt values are kept (`dataDirectory`); nil keeps them in
    ///   memory only (tests).
    public init(rules: [CredentialRule], directory: String?, logger: Logger, runner: CommandRunner = CommandRunner()) {
        self.rules = rules
        learnsFromClients = rules.contains { $0.source == .client }
        self.logger = logger
        self.runner = runner
        file = directory.map { CredentialFile(directory: $0, logger: logger) }
        if learnsFromClients, let learnt = file?.load() {
            state.withLock { $0.learnt = learnt }
        }
    }

    /// Called with an origin whose credentials changed (learnt, set by hand, a command's new
    /// answer): its held operations are tried again.
    public func onChange(_ handler: @escaping @Sendable (Origin) -> Void) {
        changed.withLock { $0 = handler }
    }

    private func rule(for origin: Origin, in state: inout State) -> CredentialRule? {
        if let known = state.ruleIndex[origin] { return known.map { rules[$0] } }
        let index = rules.firstIndex { $0.scope.covers(origin) }
        if state.ruleIndex.count > 10_000 { state.ruleIndex.removeAll() }
        state.ruleIndex[origin] = index
        return index.map { rules[$0] }
    }

    // MARK: Clients

    /// What one client connection last taught the book. A request that brings the values seen
    /// last to the same origin, with nothing learnt from any client since, is no news: it costs
    /// a comparison of bytes, with no lock taken and no String made.
    public struct LearningMemo: Sendable {
        var origin: Origin?
        var generation: UInt64 = 0
        /// The header names of the origin's `from: "client"` rule; nil when none covers it.
        var names: [String]?
        /// The value last seen for each of `names` (nil: not sent).
        var values: [[UInt8]?] = []

        public init() {}

        init(origin: Origin, generation: UInt64, names: [String]?, values: [[UInt8]?]) {
            self.origin = origin
            self.generation = generation
            self.names = names
            self.values = values
        }
    }

    /// A client sent `headers` to `origin` (forwarded or stored): under a `from: "client"` rule,
    /// the newest values of its header names are kept for the origin's replays.
    public func learn(_ headers: HTTPHeaders, origin: Origin) {
        var memo = LearningMemo()
        learn(headers, origin: origin, memo: &memo)
    }

    /// `learn(_:origin:)` for a request on the connection that keeps `memo`.
    public func learn(_ headers: HTTPHeaders, origin: Origin, memo: inout LearningMemo) {
        guard learnsFromClients else { return }
        if memo.origin == origin, memo.generation == learnings.load(ordering: .acquiring) {
            guard let names = memo.names else { return }
            if names.indices.allSatisfy({ headers.first(names[$0], is: memo.values[$0]) }) { return }
        }
        let (snapshot, names, generation) = state.withLock { state -> ([Origin: [(name: String, value: String)]]?, [String]?, UInt64) in
            let generation = learnings.load(ordering: .relaxed)
            guard let rule = rule(for: origin, in: &state), rule.source == .client else { return (nil, nil, generation) }
            let values = rule.headers.compactMap { name in headers.first(name).map { (name: name, value: $0) } }
            let old = state.learnt[origin] ?? []
            if values.isEmpty || (old.count == values.count && zip(old, values).allSatisfy({ $0.name == $1.name && $0.value == $1.value })) {
                return (nil, rule.headers, generation)
            }
            state.learnt[origin] = values
            // Under the lock, so a connection that reads this generation sees these values.
            return (state.learnt, rule.headers, learnings.add(1, ordering: .releasing).newValue)
        }
        memo = LearningMemo(origin: origin, generation: generation, names: names,
                            values: (names ?? []).map { headers.firstBytes($0) })
        guard let snapshot else { return }
        file?.save(snapshot)
        notify(origin)
    }

    // MARK: By hand

    /// `PUT /admin/credentials`: these values for `origin`, until cleared (memory only).
    public func set(_ headers: [(name: String, value: String)], for origin: Origin) {
        state.withLock { $0.byHand[origin] = headers.map { ($0.name.lowercased(), $0.value) } }
        notify(origin)
    }

    /// `DELETE /admin/credentials?origin=`: forgets what was set by hand for `origin`; false
    /// when nothing was.
    @discardableResult
    public func clear(_ origin: Origin) -> Bool {
        state.withLock { $0.byHand.removeValue(forKey: origin) != nil }
    }

    /// One origin's credentials as `GET /admin/credentials` lists them: names only.
    public struct Listing: Sendable, Equatable {
        public var origin: Origin
        public var headers: [String]
        public var source: String
        public var expiresAt: Int64?
    }

    /// What this instance holds, by origin: set by hand, learnt from clients, a command's.
    public func list() -> [Listing] {
        state.withLock { state in
            var listings: [Listing] = state.byHand.map { Listing(origin: $0.key, headers: $0.value.map(\.name), source: "admin") }
            listings += state.learnt.map { Listing(origin: $0.key, headers: $0.value.map(\.name), source: "client") }
            for (origin, command) in state.commands {
                guard let headers = command.headers else { continue }
                listings.append(Listing(origin: origin, headers: headers.map(\.name), source: "command", expiresAt: command.expiresAt))
            }
            return listings.sorted { ($0.origin.description, $0.source) < ($1.origin.description, $1.source) }
        }
    }

    // MARK: Replay

    public func answer(for origin: Origin) async -> CredentialAnswer {
        let now = WallClock.millis()
        enum Next { case answer(CredentialAnswer), run(CredentialRule) , wait }
        let next = state.withLock { state -> Next in
            if let byHand = state.byHand[origin] { return .answer(.headers(byHand)) }
            guard let rule = rule(for: origin, in: &state) else { return .answer(.none) }
            switch rule.source {
            case .client:
                return .answer(state.learnt[origin].map { .headers($0) } ?? .none)
            case .command:
                var command = state.commands[origin] ?? CommandState()
                if let headers = command.headers, (command.expiresAt ?? .max) > now { return .answer(.headers(headers)) }
                if command.waiters != nil { return .wait }
                command.waiters = []
                state.commands[origin] = command
                return .run(rule)
            }
        }
        switch next {
        case .answer(let answer):
            return answer
        case .wait:
            return await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> CredentialAnswer? in
                    if state.commands[origin]?.waiters != nil {
                        state.commands[origin]?.waiters?.append(continuation)
                        return nil
                    }
                    let command = state.commands[origin]
                    if let headers = command?.headers { return .headers(headers) }
                    return .failed(reason: command?.lastFailure ?? "the command gave no credentials", failures: command?.failures ?? 1)
                }
                if let ready { continuation.resume(returning: ready) }
            }
        case .run(let rule):
            // One run at a time per origin: whoever asks meanwhile waits for this one.
            let outcome = await runner.run(rule.command, origin: origin, timeoutSeconds: rule.timeoutSeconds, logger: logger)
            let (answer, waiters, fresh) = state.withLock { state -> (CredentialAnswer, [CheckedContinuation<CredentialAnswer, Never>], Bool) in
                var command = state.commands[origin] ?? CommandState()
                let waiters = command.waiters ?? []
                command.waiters = nil
                let answer: CredentialAnswer
                var fresh = false
                switch outcome {
                case .success(let produced):
                    let headers = rule.headers.compactMap { name in produced.headers[name].map { (name: name, value: $0) } }
                    if headers.isEmpty {
                        command.failures += 1
                        command.lastFailure = "the command's headers hold none of \(rule.headers.joined(separator: ", "))"
                        answer = .failed(reason: command.lastFailure ?? "", failures: command.failures)
                    } else {
                        fresh = headers.map(\.value) != (command.headers ?? []).map(\.value)
                            && headers.map(\.value) != command.refused
                        command.headers = headers
                        command.expiresAt = produced.expiresAt
                        command.failures = 0
                        command.lastFailure = nil
                        answer = .headers(headers)
                    }
                case .failure(let reason):
                    command.failures += 1
                    command.lastFailure = reason.description
                    command.headers = nil
                    answer = .failed(reason: reason.description, failures: command.failures)
                }
                state.commands[origin] = command
                return (answer, waiters, fresh)
            }
            for waiter in waiters { waiter.resume(returning: answer) }
            if case .failed(let reason, let failures) = answer {
                logger.warn("credentials_failed", ["origin": origin.description, "error": reason, "failures": String(failures)])
            }
            if fresh { notify(origin) }
            return answer
        }
    }

    public func refused(_ origin: Origin) {
        let ask = state.withLock { state -> Bool in
            // What clients or an admin set stays (a newer value replaces it when one comes); a
            // command's answer is asked for again now, and its held writes go once it brings
            // other values than the refused ones (the same ones would only be refused again).
            guard var command = state.commands[origin], let headers = command.headers else { return false }
            let now = WallClock.millis()
            // A second refusal within a few seconds means the command's fresh values are refused
            // too: asking again at once would loop, command and origin, as fast as they answer.
            // Its writes then wait for their schedule, a retry, or another change.
            let again = command.refusedAt.map { now - $0 < Self.refusalPauseMillis } ?? false
            command.refused = headers.map(\.value)
            command.refusedAt = now
            command.headers = nil
            state.commands[origin] = command
            return state.byHand[origin] == nil && !again
        }
        if ask { Task { _ = await answer(for: origin) } }
    }

    /// Refusals closer together than this do not have the command asked again at once.
    static let refusalPauseMillis: Int64 = 5_000

    private func notify(_ origin: Origin) {
        changed.withLock { $0 }?(origin)
    }
}
