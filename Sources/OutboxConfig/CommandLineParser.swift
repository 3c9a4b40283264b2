import OutboxModel

/// Turns `outbox`'s arguments into an `OutboxCommand`. Pure: it reads no files and
/// no environment; `ConfigLoader` does that with the options it returns.
public enum CommandLineParser {
    /// The commands that run Outbox itself or work on its files.
    static let serviceCommands = ["serve", "check-config", "ca", "migrate"]
    /// Every command word, in the order `--help` and the usage errors name them; the docs list
    /// each (a test checks).
    public static let commands = serviceCommands + AdminCommandLineParser.commandWords

    /// The option a value-taking flag sets; nil for anything else.
    private static func optionKeyPath(_ flag: String) -> WritableKeyPath<CommandLineOptions, String?>? {
        switch flag {
        case "--config": \.configPath
        case "--listen": \.listen
        case "--upstream": \.upstream
        case "--data-dir": \.dataDirectory
        case "--log-level": \.logLevel
        default: nil
        }
    }

    /// `args` excludes argv[0]. Accepts `--flag value` and `--flag=value`; `serve` is optional;
    /// `-h`/`--help`, `--version`; `ca` takes `--force`. Unknown flag/command, missing value → UsageError.
    ///
    /// The command word may stand anywhere, once. `--help` anywhere wins over everything else,
    /// then `--version`, so `outbox --bogus --help` still shows help. A value that starts with
    /// "-" must use the `--flag=value` form: `--listen --upstream x` is a missing value, not a
    /// listen address of "--upstream". A flag given twice keeps its last value, so wrappers can
    /// append overrides.
    public static func parse(_ args: [String]) throws(UsageError) -> OutboxCommand {
        if let word = commandWord(args), AdminCommandLineParser.commandWords.contains(word) {
            if args.contains("-h") || args.contains("--help") { return .help }
            return .admin(try AdminCommandLineParser.parse(args))
        }
        var options = CommandLineOptions()
        var command: String?
        var wantsHelp = false
        var wantsVersion = false
        var wantsForce = false
        var firstError: UsageError?
        var index = 0
        func record(_ message: String) {
            if firstError == nil { firstError = UsageError(message) }
        }
        while index < args.count {
            let argument = args[index]
            index += 1
            guard argument.hasPrefix("-") else {
                if command != nil {
                    record("unexpected argument \(quoted(argument))")
                } else if serviceCommands.contains(argument) {
                    command = argument
                } else {
                    record("unknown command \(quoted(argument)); commands are "
                           + commands.dropLast().joined(separator: ", ") + " and " + (commands.last ?? ""))
                }
                continue
            }
            let name: String
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            } else {
                name = argument
            }
            switch name {
            case "-h", "--help", "--version", "--force":
                if inlineValue != nil {
                    record("\(name) takes no value")
                } else if name == "--version" {
                    wantsVersion = true
                } else if name == "--force" {
                    wantsForce = true
                } else {
                    wantsHelp = true
                }
            default:
                guard let keyPath = optionKeyPath(name) else {
                    record("unknown flag \(name)")
                    continue
                }
                var value = inlineValue
                if value == nil, index < args.count, !args[index].hasPrefix("-") {
                    value = args[index]
                    index += 1
                }
                guard let value, !value.isEmpty else {
                    record("\(name): missing value")
                    continue
                }
                options[keyPath: keyPath] = value
            }
        }
        if wantsHelp { return .help }
        if wantsVersion { return .version }
        if let firstError { throw firstError }
        // Checked once the command word is known: it may come after the flag.
        if wantsForce && command != "ca" { throw UsageError("--force: only outbox ca takes it") }
        switch command {
        case "check-config": return .checkConfig(options)
        case "ca": return .ca(options, force: wantsForce)
        case "migrate": return .migrate(options)
        default: return .serve(options)
        }
    }

    /// The first argument that is neither a flag nor a flag's value: the command word, if any.
    /// Admin commands have flags of their own, so the word decides which parser reads the rest.
    private static func commandWord(_ args: [String]) -> String? {
        var index = 0
        while index < args.count {
            let argument = args[index]
            index += 1
            guard argument.hasPrefix("-") else { return argument }
            if !argument.contains("="), optionKeyPath(argument) != nil || AdminCommandLineParser.valueFlags.contains(argument),
               index < args.count, !args[index].hasPrefix("-") {
                index += 1
            }
        }
        return nil
    }

    /// Arguments are quoted in messages so that empty or space-laden ones stay visible.
    private static func quoted(_ text: String) -> String {
        JSON.quoted(text)
    }
}
