import OutboxConfig
import Testing

@Suite("CommandLineParser")
struct CommandLineParserTests {
    @Test("commands and flags in both forms parse into options", arguments: [
        ([], OutboxCommand.serve(CommandLineOptions())),
        (["serve"], .serve(CommandLineOptions())),
        (["--listen", "127.0.0.1:0"], .serve(CommandLineOptions(listen: "127.0.0.1:0"))),
        (["--listen=127.0.0.1:0"], .serve(CommandLineOptions(listen: "127.0.0.1:0"))),
        (["serve", "--config", "c.json", "--upstream=http://h:1", "--data-dir", "/d", "--log-level", "debug"],
         .serve(CommandLineOptions(configPath: "c.json", upstream: "http://h:1", dataDirectory: "/d", logLevel: "debug"))),
        (["--config", "c.json", "serve"], .serve(CommandLineOptions(configPath: "c.json"))),
        (["check-config", "--config", "c.json"], .checkConfig(CommandLineOptions(configPath: "c.json"))),
        (["--config=c.json", "check-config"], .checkConfig(CommandLineOptions(configPath: "c.json"))),
        (["check-config"], .checkConfig(CommandLineOptions())),
        (["ca"], .ca(CommandLineOptions(), force: false)),
        (["ca", "--config", "c.json", "--data-dir=/d"], .ca(CommandLineOptions(configPath: "c.json", dataDirectory: "/d"), force: false)),
        (["--force", "ca"], .ca(CommandLineOptions(), force: true)),
        (["ca", "--help"], .help),
        (["--data-dir=-odd-name"], .serve(CommandLineOptions(dataDirectory: "-odd-name"))),
        (["--upstream=http://h/?a=b"], .serve(CommandLineOptions(upstream: "http://h/?a=b"))),
        (["--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"], .serve(CommandLineOptions(listen: "127.0.0.1:2"))),
        (["--help"], .help),
        (["-h"], .help),
        (["check-config", "--help"], .help),
        (["--bogus", "--help"], .help),
        (["--version"], .version),
        (["serve", "--version"], .version),
        (["--version", "--help"], .help),
    ])
    func parses(args: [String], expected: OutboxCommand) throws {
        #expect(try CommandLineParser.parse(args) == expected)
    }

    @Test("unknown flags, unknown commands and missing values are usage errors naming them", arguments: [
        (["--bogus"], "unknown flag --bogus"),
        (["--bogus=1"], "unknown flag --bogus"),
        (["-x"], "unknown flag -x"),
        (["--"], "unknown flag --"),
        (["start"], #"unknown command "start"; commands are serve, check-config, ca, migrate, status, health, ops, op, drain, offline, online, retry, fault and credentials"#),
        (["--force"], "--force: only outbox ca takes it"),
        (["check-config", "--force"], "--force: only outbox ca takes it"),
        (["ca", "--force=yes"], "--force takes no value"),
        (["ca", "serve"], #"unexpected argument "serve""#),
        (["serve", "check-config"], #"unexpected argument "check-config""#),
        (["serve", "extra"], #"unexpected argument "extra""#),
        (["--listen"], "--listen: missing value"),
        (["--listen="], "--listen: missing value"),
        (["--config", "--listen", "127.0.0.1:0"], "--config: missing value"),
        (["--version=2"], "--version takes no value"),
        (["--listen", "a:1", "--bogus", "--other"], "unknown flag --bogus"),
    ])
    func usageErrors(args: [String], message: String) {
        #expect(throws: UsageError(message)) {
            try CommandLineParser.parse(args)
        }
    }

    @Test("the help text names every command, flag, environment variable and exit status")
    func helpTextIsComplete() {
        for word in ["serve", "check-config", "ca", "--force", "--config", "--listen", "--upstream", "--data-dir",
                     "--log-level", "--help", "--version", "OUTBOX_CONFIG", "OUTBOX_ADMIN_TOKEN",
                     "OUTBOX_ADMIN_URL", "status", "health", "ops", "op ID", "drain", "offline", "online", "retry ID",
                     "fault add", "fault list", "fault clear", "--admin", "--json", "--timeout",
                     "0  ", "1  ", "2  ", "3  ", "4  "] {
            #expect(CommandLineParser.helpText.contains(word), "help text lacks \(word)")
        }
    }
}
