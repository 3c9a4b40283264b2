import OutboxModel

/// Parses the admin commands' arguments (`outbox ops --status failed --json`) into an
/// `AdminInvocation`. Same conventions as `CommandLineParser`: `--flag value` or
/// `--flag=value`, a repeated flag keeps its last value, one-line `UsageError`s naming the
/// flag or value. Each command accepts only its own flags, so a typo'd or misplaced flag is an
/// error instead of a silently ignored filter.
enum AdminCommandLineParser {
    /// The first word of each admin command.
    static let commandWords = ["status", "health", "ops", "op", "drain", "offline", "online", "retry", "fault", "credentials"]

    /// Flags every admin command takes.
    private static let commonFlags: Set<String> = ["--admin", "--config", "--json"]
    private static let booleanFlags: Set<String> = ["--json"]
    private static let flagsByCommand: [String: Set<String>] = [
        "ops": ["--status", "--tag", "--origin", "--ordering-key", "--limit", "--after"],
        "drain": ["--timeout"],
        "fault add": ["--id", "--action", "--status", "--retry-after", "--body", "--latency", "--times",
                      "--probability", "--seed", "--for", "--origin", "--method", "--path-prefix", "--apply-to"],
        "credentials set": ["-H"],
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
        /// `-H`, which may be given many times (one header each), in order.
        var headerLines: [String] = []
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
            if name == "-H" { headerLines.append(value) }
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
        case "fault clear": parsed = .clearFaults
        case "credentials set":
            _ = flags.take("-H")
            parsed = .setCredentials(try Self.credentials(origin: try operand(operands, of: command, naming: "origin"), headerLines))
        case "credentials list": parsed = .listCredentials
        default: parsed = .clearCredentials(origin: try operand(operands, of: command, naming: "origin"))
        }
        if !["op", "retry", "credentials set", "credentials clear"].contains(command), let extra = operands.first {
            throw UsageError("unexpected argument \(JSON.quoted(extra)) after outbox \(command)")
        }
        return AdminInvocation(command: parsed, adminURL: flags.take("--admin"), configPath: flags.take("--config"), json: json)
    }

    /// The subcommands of the two-word commands.
    private static let subcommands = ["fault": ["add", "list", "clear"], "credentials": ["set", "list", "clear"]]

    /// "fault add" and friends are two words; the rest one. Returns the command and what follows.
    private static func commandName(_ words: [String]) throws(UsageError) -> (String, ArraySlice<String>) {
        guard let first = words.first else { throw UsageError("missing command") }
        guard let subs = subcommands[first] else { return (first, words.dropFirst()) }
        let list = subs.dropLast().joined(separator: ", ") + " or " + (subs.last ?? "")
        guard words.count > 1 else { throw UsageError("outbox \(first): missing subcommand (\(list))") }
        let sub = words[1]
        guard subs.contains(sub) else {
            throw UsageError("outbox \(first): unknown subcommand \(JSON.quoted(sub)); subcommands are \(list.replacingOccurrences(of: " or ", with: " and "))")
        }
        return ("\(first) \(sub)", words.dropFirst(2))
    }

    /// The body of `PUT /admin/credentials` from `outbox credentials set ORIGIN -H 'Name: value'…`.
    /// A value is never quoted in an error: it is a secret.
    private static func credentials(origin: String, _ lines: [String]) throws(UsageError) -> JSON {
        guard !lines.isEmpty else { throw UsageError("outbox credentials set: at least one -H 'Name: value' is required") }
        var headers: [(key: String, value: JSON)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else {
                throw UsageError("-H: expected 'Name: value' (the value is not shown)")
            }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, !value.isEmpty else { throw UsageError("-H: expected 'Name: value' (the value is not shown)") }
            headers.append((name, .string(value)))
        }
        return .object([("origin", .string(origin)), ("headers", .object(headers))])
    }

    private static func operand(_ operands: ArraySlice<String>, of command: String,
                                naming what: String = "operation id") throws(UsageError) -> String {
        guard let id = operands.first else { throw UsageError("outbox \(command): missing \(what)") }
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
