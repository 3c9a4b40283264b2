/// What the command line asks for.
public enum OutboxCommand: Sendable, Equatable {
    /// Run the proxy (`outbox [serve] …`).
    case serve(CommandLineOptions)
    /// Validate the config and print it (`outbox check-config …`): exit 0 valid, 2 invalid.
    case checkConfig(CommandLineOptions)
    /// Print `CommandLineParser.helpText` to stdout, exit 0.
    case help
    /// Print `Outbox.version` to stdout, exit 0.
    case version
}
