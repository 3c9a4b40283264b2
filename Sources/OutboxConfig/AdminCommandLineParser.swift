import OutboxModel

/// Parses the admin commands' arguments (`outbox ops --status failed --json`) into an
/// `AdminInvocation`. Same conventions as `CommandLineParser`: `--flag value` or
/// `--flag=value`, a repeated flag keeps its last value, one-line `UsageError`s naming the
/// flag or value. Each command accepts only its own flags, so a typo'd or misplaced flag is an
/// error instead of a silently ignored filter.
enum AdminCommandLineParser {
    /// The first word of each admin command.
    static let commandWords = ["status", "health", "ops", "op", "drain", "offline", "online", "retry", "fault"]

    /// Flags every admin command takes.
    private static let commonFlags: Set<String> = ["--admin", "--config", "--json"]
    private static let booleanFlags: Set<String> = ["--json"]
    private static let flagsByCommand: [String: Set<String>] = [
        "ops": ["--status", "--tag", "--origin", "--ordering-key", "--limit", "--after"],
        "drain": ["--timeout"],
        "fault add": ["--id", "--action", "--status", "--retry-after", "--body", "--latency", "--times",
                      "--probability", "--seed", "--for", "--origin", "--method", "--path-prefix", "--apply-to"],
    ]

    /// Every flag some admin command takes a value for, so the command word can be found
    /// before the command is known.
    static let valueFlags: Set<String> = commonFlags.union(flagsByCommand.values.joined()).subtracting(booleanFlags)

    /// The default of `outbox drain --timeout`: long enough for a CI queue, short enough that a
    /// stuck one fails the job within its time.
    static let defaultDrainTimeoutSeconds = 60.0

    static func parse(_ args: [String]) throws(UsageError) -> AdminInvocation {
        var words: [String] = []
        var values: [String: String] = [:]
        var json = false
        var index = 0
        while index < args.count {
            let argument = args[index]
            index += 1
            guard argument.hasPrefix("-") else {
                words.append(argument)
                continue
            }
            var name = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            if booleanFlags.contains(name) {
                guard inline == nil else { throw UsageError("\(name) takes no value") }
                json = true
                continue
            }
            guard valueFlags.contains(name) else { throw UsageError("unknown flag \(name)") }
            var value = inline
            if value == nil, index < args.count, !args[index].hasPrefix("-") || isNumber(args[index]) {
                value = args[index]
                index += 1
            }
            guard let value, !value.isEmpty else { throw UsageError("\(name): missing value") }
            values[name] = value
        }
        let (command, operands) = try commandName(words)
        let allowed = commonFlags.union(flagsByCommand[command] ?? [])
        if let stray = values.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw UsageError("\(stray): outbox \(command) does not take it")
        }
        var flags = Flags(values: values)
        let parsed: AdminCommand
        switch command {
        case "status": parsed = .status
        case "health": parsed = .health
        case "ops": parsed = .operations(try flags.operationsFilter())
        case "op": parsed = .operation(id: try operand(operands, of: command))
        case "retry": parsed = .retry(id: try operand(operands, of: command))
        case "drain":
            parsed = .drain(timeoutSeconds: try flags.number("--timeout", in: 0...3600) ?? defaultDrainTimeoutSeconds)
        case "offline": parsed = .connectivity(offline: true)
        case "online": parsed = .connectivity(offline: false)
        case "fault add": parsed = .addFault(try flags.faultRule())
        case "fault list": parsed = .listFaults
        default: parsed = .clearFaults
        }
        if command != "op" && command != "retry", let extra = operands.first {
            throw UsageError("unexpected argument \(JSON.quoted(extra)) after outbox \(command)")
        }
        return AdminInvocation(command: parsed, adminURL: flags.take("--admin"), configPath: flags.take("--config"), json: json)
    }

    /// "fault add" and friends are two words; the rest one. Returns the command and what follows.
    private static func commandName(_ words: [String]) throws(UsageError) -> (String, ArraySlice<String>) {
        guard let first = words.first else { throw UsageError("missing command") }
        guard first == "fault" else { return (first, words.dropFirst()) }
        guard words.count > 1 else { throw UsageError("outbox fault: missing subcommand (add, list or clear)") }
        let sub = words[1]
        guard ["add", "list", "clear"].contains(sub) else {
            throw UsageError("outbox fault: unknown subcommand \(JSON.quoted(sub)); subcommands are add, list and clear")
        }
        return ("fault \(sub)", words.dropFirst(2))
    }

    private static func operand(_ operands: ArraySlice<String>, of command: String) throws(UsageError) -> String {
        guard let id = operands.first else { throw UsageError("outbox \(command): missing operation id") }
        guard operands.count == 1 else {
            throw UsageError("unexpected argument \(JSON.quoted(operands[operands.startIndex + 1])) after outbox \(command) \(id)")
        }
        return id
    }

    /// `-1` and `-0.5` are values, not flags: a negative number is refused by the range check
    /// with a message naming it, instead of reading as a missing value.
    private static func isNumber(_ text: String) -> Bool {
        CheckedNumber.isDecimal(text.utf8)
    }

    /// The given flag values, taken out one at a time and checked.
    private struct Flags {
        var values: [String: String]

        mutating func take(_ name: String) -> String? {
            values.removeValue(forKey: name)
        }

        // Numbers go through CheckedNumber: plain decimal only (no `0x10`, `nan`, `inf`, `1_000`),
        // finite, in range; the usage error names the flag.
        mutating func integer(_ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int? {
            guard let text = take(name) else { return nil }
            do {
                return try CheckedNumber.integer(text, in: range)
            } catch {
                throw Self.usage(name, error)
            }
        }

        mutating func number(_ name: String, in range: ClosedRange<Double>) throws(UsageError) -> Double? {
            guard let text = take(name) else { return nil }
            do {
                return try CheckedNumber.number(text, in: range)
            } catch {
                throw Self.usage(name, error)
            }
        }

        private static func usage(_ name: String, _ error: NumberError) -> UsageError {
            UsageError("\(name): expected \(error.expected), got \(JSON.quoted(error.found))")
        }

        mutating func operationsFilter() throws(UsageError) -> AdminCommand.OperationsFilter {
            var filter = AdminCommand.OperationsFilter()
            if let text = take("--status") {
                guard let status = OperationStatus(rawValue: text) else {
                    throw UsageError("--status: expected one of \(OperationStatus.allCases.map(\.rawValue).joined(separator: ", ")), "
                                     + "got \(JSON.quoted(text))")
                }
                filter.status = status
            }
            filter.tag = take("--tag")
            filter.origin = take("--origin")
            filter.orderingKey = take("--ordering-key")
            filter.limit = try integer("--limit", in: 1...1000)
            filter.after = take("--after")
            return filter
        }

        /// The rule's JSON, members in the order the API documents them; only what was given.
        mutating func faultRule() throws(UsageError) -> JSON {
            guard let action = take("--action") else {
                throw UsageError("outbox fault add: --action is required (status, reset, timeout, offline or latency)")
            }
            var match: [(key: String, value: JSON)] = []
            for (flag, key) in [("--origin", "origin"), ("--method", "method"), ("--path-prefix", "pathPrefix")] {
                if let value = take(flag) { match.append((key, .string(value))) }
            }
            var rule: [(key: String, value: JSON)] = []
            if let id = take("--id") { rule.append(("id", .string(id))) }
            if !match.isEmpty { rule.append(("match", .object(match))) }
            if let applyTo = take("--apply-to") { rule.append(("applyTo", .string(applyTo))) }
            rule.append(("action", .string(action)))
            if let status = try integer("--status", in: 100...599) { rule.append(("status", .int(status))) }
            if let seconds = try number("--retry-after", in: 0...86_400) { rule.append(("retryAfterSeconds", .double(seconds))) }
            if let body = take("--body") { rule.append(("body", .string(body))) }
            if let seconds = try number("--latency", in: 0...3600) { rule.append(("latencySeconds", .double(seconds))) }
            if let times = try integer("--times", in: 1...Int(Int32.max)) { rule.append(("times", .int(times))) }
            if let probability = try number("--probability", in: 0...1) { rule.append(("probability", .double(probability))) }
            if let seed = try integer("--seed", in: Int.min...Int.max) { rule.append(("seed", .int(seed))) }
            if let seconds = try number("--for", in: 0...(86_400 * 365)) { rule.append(("forSeconds", .double(seconds))) }
            return .object(rule)
        }
    }
}
