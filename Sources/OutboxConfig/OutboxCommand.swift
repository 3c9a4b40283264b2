/// What the command line asks for.
public enum OutboxCommand: Sendable, Equatable {
    /// Run the proxy (`outbox [serve] …`).
    case serve(CommandLineOptions)
    /// Validate the config and print it (`outbox check-config …`): exit 0 valid, 2 invalid.
    case checkConfig(CommandLineOptions)
    /// Print the interception CA certificate (PEM) to stdout, creating it first when needed
    /// (`outbox ca …`); with `force` (`--force`), replace it with a new one.
    case ca(CommandLineOptions, force: Bool)
    /// Create or migrate the PostgreSQL store's schema and print its version (`outbox migrate
    /// …`): exit 0 done, 1 the database failed, 2 the config is invalid or the schema newer.
    case migrate(CommandLineOptions)
    /// Ask a running Outbox's admin API (`outbox status`, `health`, `ops`, `op`, `drain`, `offline`,
    /// `online`, `retry`, `fault add|list|clear`) and print the answer.
    case admin(AdminInvocation)
    /// Print `CommandLineParser.helpText` to stdout, exit 0.
    case help
    /// Print `Outbox.version` to stdout, exit 0.
    case version
}
