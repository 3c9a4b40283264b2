import OutboxConfig
import OutboxModel
import Testing

@Suite("Admin command line")
struct AdminCommandLineParserTests {
    typealias Filter = AdminCommand.OperationsFilter

    @Test("each admin command and its flags parse into an invocation", arguments: [
        (["status"], AdminInvocation(command: .status)),
        (["status", "--json", "--admin", "http://127.0.0.1:9"], AdminInvocation(command: .status, adminURL: "http://127.0.0.1:9", json: true)),
        (["--admin=http://h:1", "--config", "c.json", "status"],
         AdminInvocation(command: .status, adminURL: "http://h:1", configPath: "c.json")),
        (["health"], AdminInvocation(command: .health)),
        (["health", "--config", "/etc/outbox/config.json"], AdminInvocation(command: .health, configPath: "/etc/outbox/config.json")),
        (["ops"], AdminInvocation(command: .operations(Filter()))),
        (["ops", "--status", "failed", "--tag", "a b", "--origin=http://o:1", "--ordering-key", "user-7", "--limit", "5",
          "--after", "x"],
         AdminInvocation(command: .operations(Filter(status: .failed, tag: "a b", origin: "http://o:1", orderingKey: "user-7",
                                                     limit: 5, after: "x")))),
        (["ops", "--limit", "1", "--limit", "2"], AdminInvocation(command: .operations(Filter(limit: 2)))),
        (["op", "0f8e"], AdminInvocation(command: .operation(id: "0f8e"))),
        (["retry", "--json", "0f8e"], AdminInvocation(command: .retry(id: "0f8e"), json: true)),
        (["drain"], AdminInvocation(command: .drain(timeoutSeconds: 60))),
        (["drain", "--timeout", "0.5"], AdminInvocation(command: .drain(timeoutSeconds: 0.5))),
        (["offline"], AdminInvocation(command: .connectivity(offline: true))),
        (["online"], AdminInvocation(command: .connectivity(offline: false))),
        (["fault", "list"], AdminInvocation(command: .listFaults)),
        (["fault", "clear", "--json"], AdminInvocation(command: .clearFaults, json: true)),
    ])
    func parses(args: [String], expected: AdminInvocation) throws {
        #expect(try CommandLineParser.parse(args) == .admin(expected))
    }

    @Test("fault add turns its flags into the API's rule, members in the documented order, only those given")
    func faultRule() throws {
        let parsed = try CommandLineParser.parse([
            "fault", "add", "--for", "30", "--seed", "-42", "--probability", "0.1", "--times", "2", "--latency", "0.2",
            "--body", "{}", "--retry-after", "1", "--status", "503", "--action", "status", "--apply-to", "replay",
            "--path-prefix", "/v1/orders", "--method", "POST", "--origin", "http://127.0.0.1:9000", "--id", "orders-down",
        ])
        guard case .admin(let invocation) = parsed, case .addFault(let rule) = invocation.command else {
            Issue.record("not a fault add: \(parsed)")
            return
        }
        #expect(rule.rendered() == #"{"id":"orders-down","match":{"origin":"http://127.0.0.1:9000","method":"POST","pathPrefix":"/v1/orders"},"#
                + #""applyTo":"replay","action":"status","status":503,"retryAfterSeconds":1,"body":"{}","latencySeconds":0.2,"#
                + #""times":2,"probability":0.1,"seed":-42,"forSeconds":30}"#)
        let minimal = try CommandLineParser.parse(["fault", "add", "--action", "reset"])
        #expect(minimal == .admin(AdminInvocation(command: .addFault(.object([("action", .string("reset"))])))))
    }

    @Test("bad admin arguments are one-line usage errors naming the flag or value", arguments: [
        (["ops", "--timeout", "3"], "--timeout: outbox ops does not take it"),
        (["status", "--status", "failed"], "--status: outbox status does not take it"),
        (["health", "--timeout", "3"], "--timeout: outbox health does not take it"),
        (["ops", "--status", "done"], #"--status: expected one of pending, inProgress, completed, failed, conflict, got "done""#),
        (["ops", "--limit", "0"], #"--limit: expected an integer from 1 to 1000, got "0""#),
        (["drain", "--timeout", "-1"], #"--timeout: expected a number from 0 to 3600, got "-1""#),
        (["drain", "--timeout", "soon"], #"--timeout: expected a number from 0 to 3600, got "soon""#),
        (["drain", "--timeout"], "--timeout: missing value"),
        // Extreme and non-decimal numbers: refused by CheckedNumber, naming the flag (they were
        // partly accepted: Double("0x10") is 16).
        (["drain", "--timeout", "0x10"], #"--timeout: expected a number from 0 to 3600, got "0x10""#),
        (["drain", "--timeout", "nan"], #"--timeout: expected a number from 0 to 3600, got "nan""#),
        (["drain", "--timeout", "1e300"], #"--timeout: expected a number from 0 to 3600, got "1e300""#),
        (["drain", "--timeout", "-1e300"], #"--timeout: expected a number from 0 to 3600, got "-1e300""#),
        (["drain", "--timeout", "-inf"], "--timeout: missing value"),
        (["drain", "--timeout="], "--timeout: missing value"),
        (["ops", "--limit", "99999999999999999999"], #"--limit: expected an integer from 1 to 1000, got "99999999999999999999""#),
        (["ops", "--limit", "1_000"], #"--limit: expected an integer from 1 to 1000, got "1_000""#),
        (["ops", "--limit", "+5"], #"--limit: expected an integer from 1 to 1000, got "+5""#),
        (["fault", "add", "--action", "reset", "--times", "1e2"], #"--times: expected an integer from 1 to 2147483647, got "1e2""#),
        (["fault", "add", "--action", "reset", "--seed", "99999999999999999999"], #"--seed: expected an integer, got "99999999999999999999""#),
        (["fault", "add", "--action", "status", "--status", "503", "--retry-after", "1e300"],
         #"--retry-after: expected a number from 0 to 86400, got "1e300""#),
        (["fault", "add", "--action", "latency", "--latency", String(repeating: "9", count: 5000)],
         #"--latency: expected a number from 0 to 3600, got "9999999999999999999999999999999999999999…""#),
        (["op"], "outbox op: missing operation id"),
        (["retry", "a", "b"], #"unexpected argument "b" after outbox retry a"#),
        (["status", "now"], #"unexpected argument "now" after outbox status"#),
        (["fault"], "outbox fault: missing subcommand (add, list or clear)"),
        (["fault", "remove"], #"outbox fault: unknown subcommand "remove"; subcommands are add, list and clear"#),
        (["fault", "add", "--status", "503"], "outbox fault add: --action is required (status, reset, timeout, offline or latency)"),
        (["fault", "add", "--action", "status", "--status", "5000"], #"--status: expected an integer from 100 to 599, got "5000""#),
        (["fault", "add", "--action", "status", "--probability", "2"], #"--probability: expected a number from 0 to 1, got "2""#),
        (["status", "--json=yes"], "--json takes no value"),
        (["status", "--bogus"], "unknown flag --bogus"),
    ])
    func usageErrors(args: [String], message: String) {
        #expect(throws: UsageError(message)) {
            try CommandLineParser.parse(args)
        }
    }

    @Test("--help with an admin command shows help; serve's flags still find their command")
    func helpAndCommandWord() throws {
        #expect(try CommandLineParser.parse(["drain", "--help"]) == .help)
        // "status" here is a flag's value, not the command.
        #expect(try CommandLineParser.parse(["--data-dir", "status"]) == .serve(CommandLineOptions(dataDirectory: "status")))
    }
}
