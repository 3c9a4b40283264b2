/// The flags of `serve`, `check-config` and `ca`, as typed: values are checked later by
/// `ConfigLoader.load`, which names the flag in its error. nil means "flag not given".
public struct CommandLineOptions: Sendable, Equatable {
    /// `--config FILE`; beats `OUTBOX_CONFIG`.
    public var configPath: String?
    /// `--listen HOST:PORT`; beats the file's `listen`.
    public var listen: String?
    /// `--upstream URL`; beats the file's `upstream`.
    public var upstream: String?
    /// `--data-dir DIR`; beats the file's `dataDirectory`.
    public var dataDirectory: String?
    /// `--log-level debug|info|warn|error`; beats the file's `logLevel`.
    public var logLevel: String?

    /// Options with the given flags set and every other flag absent.
    public init(
        configPath: String? = nil, listen: String? = nil, upstream: String? = nil,
        dataDirectory: String? = nil, logLevel: String? = nil
    ) {
        self.configPath = configPath
        self.listen = listen
        self.upstream = upstream
        self.dataDirectory = dataDirectory
        self.logLevel = logLevel
    }
}
