import Glibc
import OutboxModel
import OutboxTelemetry

/// Builds the effective configuration from its three sources, in rising
/// precedence: the config file, the command-line flags, `OUTBOX_ADMIN_TOKEN` and
/// `OUTBOX_POSTGRES_URL`.
public enum ConfigLoader {
    /// Config files are small; a bound keeps `--config /dev/zero` from eating memory.
    static let maxFileBytes = 1 << 20

    /// Reads the file named by options.configPath, else by environment["OUTBOX_CONFIG"], else
    /// defaults; then applies flags (--listen, --upstream, --data-dir, --log-level; each validated
    /// with an error naming the flag: `--listen: expected HOST:PORT, got "x"`), then
    /// environment["OUTBOX_ADMIN_TOKEN"] over admin.token and environment["OUTBOX_POSTGRES_URL"]
    /// over queue.postgres.url (`store: "postgres"` needs one of them); last, `admin.listen` must not be the
    /// `listen` address (port 0 excepted: each picks its own port), and every file a `tls` key names
    /// must be readable (`checkReadable`). A missing/unreadable file or invalid
    /// JSON is a ConfigError naming the file (and line/column if you can get it cheaply).
    ///
    /// Errors from the file read `FILE: …` (`cfg.json: queue.maxBodyBytes: expected integer`,
    /// `cfg.json: invalid JSON at line 3, column 7: …`). Empty `OUTBOX_CONFIG` and
    /// `OUTBOX_ADMIN_TOKEN` count as unset. A relative `dataDirectory` is relative to the
    /// working directory, not to the config file.
    public static func load(_ options: CommandLineOptions, environment: [String: String]) throws(ConfigError) -> OutboxConfig {
        var config = OutboxConfig()
        if let path = options.configPath ?? environment["OUTBOX_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) {
            let bytes = try readFile(path)
            do {
                config = try OutboxConfig.parse(json: bytes)
            } catch {
                throw ConfigError("\(path): \(error.message)")
            }
        }
        if let listen = options.listen {
            guard let address = SocketAddressSpec.parse(listen) else {
                throw ConfigError("--listen: expected HOST:PORT, got \(JSON.quoted(listen))")
            }
            config.listen = address
        }
        if let upstream = options.upstream {
            guard let url = UpstreamURL.parse(upstream) else {
                throw ConfigError("--upstream: expected http:// or https:// URL without query or fragment, got \(JSON.quoted(upstream))")
            }
            config.upstream = url
        }
        if let directory = options.dataDirectory {
            guard OutboxConfig.isValidDataDirectory(directory) else {
                throw ConfigError("--data-dir: expected non-empty path, got \(JSON.quoted(directory))")
            }
            config.dataDirectory = directory
        }
        if let level = options.logLevel {
            guard let parsed = LogLevel(rawValue: level) else {
                let choices = LogLevel.allCases.map(\.rawValue).joined(separator: ", ")
                throw ConfigError("--log-level: expected one of \(choices), got \(JSON.quoted(level))")
            }
            config.logLevel = parsed
        }
        if let token = environment["OUTBOX_ADMIN_TOKEN"], !token.isEmpty {
            // The value is a secret: the message must not echo it.
            guard OutboxConfig.isValidAdminToken(token) else {
                throw ConfigError("OUTBOX_ADMIN_TOKEN: expected visible ASCII without spaces")
            }
            config.admin.token = token
        }
        if let url = environment["OUTBOX_POSTGRES_URL"], !url.isEmpty {
            // The value may hold a password: the message must not echo it.
            guard OutboxConfig.Queue.Postgres.isValidURL(url) else {
                throw ConfigError("OUTBOX_POSTGRES_URL: expected a connection string without NUL or line breaks")
            }
            config.queue.postgres.url = url
        }
        if config.queue.store == .postgres, config.queue.postgres.url == nil {
            throw ConfigError("queue.postgres.url: required when queue.store is \"postgres\" (or set OUTBOX_POSTGRES_URL)")
        }
        // Checked on the merged result: a `--listen` flag may move the main listener away from
        // an `admin.listen` that the file gave the same address.
        if let admin = config.admin.listen, admin.port != 0, admin.port == config.listen.port,
           admin.host.lowercased() == config.listen.host.lowercased() {
            throw ConfigError("admin.listen: expected an address other than listen, got \(JSON.quoted(admin.description))")
        }
        try checkReadable(config.tls)
        return config
    }

    /// Every file the `tls` keys name must be readable now, not at the first handshake that
    /// needs it: `tls.caFile: cannot read /x: No such file or directory`.
    static func checkReadable(_ tls: OutboxConfig.TLS) throws(ConfigError) {
        let files = [
            ("tls.caFile", tls.caFile), ("tls.clientCertificateFile", tls.clientCertificateFile),
            ("tls.clientKeyFile", tls.clientKeyFile), ("tls.intercept.caCertificateFile", tls.intercept.caCertificateFile),
            ("tls.intercept.caKeyFile", tls.intercept.caKeyFile),
        ]
        for case let (key, path?) in files {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            var code = fd < 0 ? errno : 0
            if fd >= 0 {
                // Opening a directory succeeds; reading it is what fails (EISDIR).
                var byte: UInt8 = 0
                while read(fd, &byte, 1) < 0 {
                    guard errno == EINTR else {
                        code = errno
                        break
                    }
                }
                close(fd)
            }
            if code != 0 { throw ConfigError("\(key): cannot read \(path): \(String(cString: strerror(code)))") }
        }
    }

    /// The whole file, read with plain syscalls so the error carries the OS reason.
    static func readFile(_ path: String) throws(ConfigError) -> [UInt8] {
        do {
            return try SmallFile.read(path, atMost: maxFileBytes)
        } catch {
            switch error {
            case .system(let code): throw fileError(path, code)
            case .tooLarge: throw ConfigError("\(path): config file larger than \(maxFileBytes) bytes")
            }
        }
    }

    private static func fileError(_ path: String, _ code: Int32) -> ConfigError {
        ConfigError("\(path): cannot read config file: \(String(cString: strerror(code)))")
    }
}
