import OutboxModel
import OutboxTelemetry

extension OutboxConfig {
    /// Strict parse of a JSON config document: unknown keys and wrong types are errors naming the
    /// dotted key path, e.g. `queue.maxBodyBytes: expected integer`, `retrie: unknown key`,
    /// `listen: expected "host:port", got "localhost"`. Values are range-checked too (ports,
    /// positive sizes, seconds ≥ 0 and finite, statuses 100–599, methods are tokens, header names
    /// are tokens, pathPrefix starts with "/" and has no trailing "/", allowedHosts entries are a
    /// host, "*.suffix" or "*"). Retry preset: the preset's values first, then explicit keys win.
    /// Exact bounds: sizes and counts ≥ 1, `maxRetries` ≥ 0, seconds 0...1e9, `multiplier`
    /// 1...1000, ports 1...65535 (`listen` and `admin.listen` 0...65535). `allowedHosts` entries are stored
    /// lowercased and `redactHeaders` lowercased. Duplicate keys are a JSON error.
    /// Members are checked in document order and the first problem is reported; invalid JSON
    /// reads `invalid JSON at line L, column C: …`, after the key path when the fault is in a
    /// member's value (`retry.maxRetries: invalid JSON at line 1, column 26: unexpected 'N', …`). `null` is accepted only where it is a value
    /// (`upstream`, `reachability.probePath`, `admin.listen`, `admin.token`, the `tls` file paths), not as "use the default".
    public static func parse(json: [UInt8]) throws(ConfigError) -> OutboxConfig {
        let document: JSON
        do {
            document = try JSONReader.parse(json)
        } catch {
            // A value that is not JSON (`NaN`, `0x10`) or a number too large to read is still
            // a problem of its key: name it first, as every other config error does.
            let problem = "invalid JSON at line \(error.line), column \(error.column): \(error.reason)"
            throw ConfigError(error.path.map { "\($0): \(problem)" } ?? problem)
        }
        guard case .object = document else { throw ConfigError("expected a JSON object at the top level") }
        var config = OutboxConfig()
        for (key, field) in try ConfigField(path: "", value: document).members() {
            switch key {
            case "listen": config.listen = try field.listenAddress()
            case "upstream": config.upstream = try field.upstreamURL()
            case "dataDirectory": config.dataDirectory = try field.dataDirectory()
            case "logLevel": config.logLevel = try field.enumeration(LogLevel.self)
            case "forwardProxy": config.forwardProxy = try ForwardProxy(field)
            case "queue": config.queue = try Queue(field)
            case "replay": config.replay = try Replay(field)
            case "retry": config.retry = try Retry(field)
            case "reachability": config.reachability = try ReachabilitySettings(field)
            case "idempotency": config.idempotency = try Idempotency(field)
            case "admin": config.admin = try Admin(field)
            case "tls": config.tls = try TLS(field)
            case "limits": config.limits = try Limits(field)
            default: throw field.unknownKey()
            }
        }
        return config
    }

    /// Whether `text` can name the data directory: non-empty, no control characters.
    static func isValidDataDirectory(_ text: String) -> Bool {
        !text.isEmpty && !text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// Whether `text` can be an admin bearer token: visible ASCII without spaces, so it can be
    /// typed in `curl -H "Authorization: Bearer …"` and compared byte for byte.
    static func isValidAdminToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}

extension OutboxConfig.ForwardProxy {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "enabled": enabled = try field.bool()
            case "allowedHosts": allowedHosts = try field.array().map { (entry) throws(ConfigError) in try entry.allowedHost() }
            case "connectPorts": connectPorts = try field.array().map { (entry) throws(ConfigError) in try entry.port() }
            default: throw field.unknownKey()
            }
        }
    }
}

extension OutboxConfig.Queue {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "methods": methods = try field.array().map { (entry) throws(ConfigError) in try entry.token("method token") }
            case "maxBodyBytes": maxBodyBytes = try field.integer(atLeast: 1)
            case "maxOperations": maxOperations = try field.integer(atLeast: 1)
            case "ttlSeconds": ttlSeconds = try field.seconds()
            case "completedRetentionSeconds": completedRetentionSeconds = try field.seconds()
            case "unavailableStatuses": unavailableStatuses = try field.statuses()
            case "store": store = try field.enumeration(Store.self)
            case "postgres": postgres = try Postgres(field)
            default: throw field.unknownKey()
            }
        }
    }
}

extension OutboxConfig.Queue.Postgres {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "url":
                // Never echoed: the string may hold a password.
                url = try field.optionalString()
                if let url, !Self.isValidURL(url) { throw field.error("expected a non-empty connection string without NUL or line breaks") }
            case "schema":
                schema = try field.string()
                guard Self.isValidSchema(schema) else { throw field.invalid("a schema name of 1 to 63 bytes without NUL") }
            case "maxConnections": maxConnections = try field.integer(in: 2...100, "integer 2-100")
            case "leaseSeconds":
                // One range, one message: 1e300 and 5000 are told the same bounds.
                leaseSeconds = try field.number(in: 0.5...3600, "seconds between 0.5 and 3600")
            case "instanceName":
                instanceName = try field.optionalString()
                if let name = instanceName, !Self.isValidInstanceName(name) {
                    throw field.invalid("1 to 100 visible characters")
                }
            default: throw field.unknownKey()
            }
        }
    }

    /// A connection string libpq can be handed: any text but empty, a NUL (a C string ends there)
    /// or a line break (it would split a log line if libpq quoted it).
    static func isValidURL(_ text: String) -> Bool {
        !text.isEmpty && !text.utf8.contains { $0 == 0 || $0 == 0x0A || $0 == 0x0D }
    }

    /// A name PostgreSQL keeps whole (NAMEDATALEN 64 with its terminator) and libpq can carry.
    static func isValidSchema(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 63 && !name.utf8.contains(0)
    }

    /// Shown in views and stored in rows: printable, no control characters, short.
    static func isValidInstanceName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 100 && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }
}

extension OutboxConfig.Replay {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "maxConcurrentPerOrigin": maxConcurrentPerOrigin = try field.integer(atLeast: 1)
            case "authStatuses":
                // A success or a redirect cannot say the credentials were refused.
                authStatuses = try field.array().map { (entry) throws(ConfigError) in try entry.integer(in: 400...599, "status 400-599") }
            case "credentials":
                credentials = try field.array().map { (entry) throws(ConfigError) in try CredentialRule(entry) }
            case "attemptTimeoutSeconds":
                // An attempt without time would never be sent: 0 is refused, not "no limit".
                attemptTimeoutSeconds = try field.seconds()
                guard attemptTimeoutSeconds > 0 else { throw field.invalid("seconds > 0") }
            default: throw field.unknownKey()
            }
        }
    }
}

extension OutboxConfig.Retry {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        let members = try object.members()
        // The preset is applied first wherever it is written, so explicit keys always win.
        if let presetField = members.first(where: { $0.key == "preset" })?.field {
            self.init(preset: try presetField.enumeration(RetryPreset.self))
        } else {
            self.init()
        }
        for (key, field) in members {
            switch key {
            case "preset": continue
            case "maxRetries": maxRetries = try field.integer(atLeast: 0)
            case "baseDelaySeconds": baseDelaySeconds = try field.seconds()
            case "multiplier":
                // Below 1 the "backoff" would shrink; it is surely a typo for a growth factor.
                multiplier = try field.number(in: 1...1_000, "number 1-1000")
            case "maxDelaySeconds": maxDelaySeconds = try field.seconds()
            case "jitter": jitter = try field.bool()
            case "retryableStatuses": retryableStatuses = try field.statuses()
            default: throw field.unknownKey()
            }
        }
    }
}

extension OutboxConfig.ReachabilitySettings {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "probeIntervalSeconds": probeIntervalSeconds = try field.seconds()
            case "probePath": probePath = try field.probePath()
            case "connectTimeoutSeconds": connectTimeoutSeconds = try field.seconds()
            case "responseTimeoutSeconds": responseTimeoutSeconds = try field.seconds()
            case "forgetAfterSeconds": forgetAfterSeconds = try field.seconds()
            default: throw field.unknownKey()
            }
        }
    }
}

extension OutboxConfig.Idempotency {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "header": header = try field.token("header name token")
            default: throw field.unknownKey()
            }
        }
    }
}

extension OutboxConfig.Admin {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "pathPrefix": pathPrefix = try field.pathPrefix()
            case "listen": listen = try field.optionalListenAddress()
            case "token":
                token = try field.optionalString()
                if let token, !OutboxConfig.isValidAdminToken(token) {
                    throw field.error("expected visible ASCII without spaces, or null")
                }
            case "redactHeaders":
                // Header names are case-insensitive; storing them lowercased lets the admin API
                // compare with one `lowercased()` on its side.
                redactHeaders = try field.array().map { (entry) throws(ConfigError) in
                    try entry.token("header name token").lowercased()
                }
            default: throw field.unknownKey()
            }
        }
    }
}

extension OutboxConfig.TLS {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "caFile": caFile = try field.optionalPath()
            case "verify": verify = try field.bool()
            case "clientCertificateFile": clientCertificateFile = try field.optionalPath()
            case "clientKeyFile": clientKeyFile = try field.optionalPath()
            case "intercept": intercept = try Intercept(field)
            default: throw field.unknownKey()
            }
        }
        try object.requirePair(("clientCertificateFile", clientCertificateFile), ("clientKeyFile", clientKeyFile))
    }
}

extension OutboxConfig.TLS.Intercept {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "hosts": hosts = try field.array().map { (entry) throws(ConfigError) in try entry.allowedHost() }
            case "caCertificateFile": caCertificateFile = try field.optionalPath()
            case "caKeyFile": caKeyFile = try field.optionalPath()
            default: throw field.unknownKey()
            }
        }
        try object.requirePair(("caCertificateFile", caCertificateFile), ("caKeyFile", caKeyFile))
    }
}

extension OutboxConfig.Limits {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        self.init()
        for (key, field) in try object.members() {
            switch key {
            case "maxHeaderBytes": maxHeaderBytes = try field.integer(atLeast: 1)
            case "headerTimeoutSeconds": headerTimeoutSeconds = try field.seconds()
            case "idleTimeoutSeconds": idleTimeoutSeconds = try field.seconds()
            case "maxConnections": maxConnections = try field.integer(atLeast: 1)
            case "bodyMemoryBytes": bodyMemoryBytes = try field.integer(atLeast: 0)
            case "shutdownTimeoutSeconds": shutdownTimeoutSeconds = try field.seconds()
            default: throw field.unknownKey()
            }
        }
    }
}

extension ConfigField {
    fileprivate func listenAddress() throws(ConfigError) -> SocketAddressSpec {
        guard let address = SocketAddressSpec.parse(try string()) else { throw invalid("\"host:port\"") }
        return address
    }

    fileprivate func optionalListenAddress() throws(ConfigError) -> SocketAddressSpec? {
        guard let text = try optionalString() else { return nil }
        guard let address = SocketAddressSpec.parse(text) else { throw invalid("\"host:port\" or null") }
        return address
    }

    fileprivate func upstreamURL() throws(ConfigError) -> UpstreamURL? {
        guard let text = try optionalString() else { return nil }
        guard let url = UpstreamURL.parse(text) else {
            throw invalid("http:// or https:// URL without query or fragment")
        }
        return url
    }

    fileprivate func dataDirectory() throws(ConfigError) -> String {
        let text = try string()
        guard OutboxConfig.isValidDataDirectory(text) else { throw invalid("non-empty path") }
        return text
    }

    /// Two file keys of this object that only work together (a certificate and its key): both
    /// or neither, since one alone cannot be used and silently ignoring it would surprise.
    fileprivate func requirePair(_ first: (key: String, value: String?), _ second: (key: String, value: String?)) throws(ConfigError) {
        guard (first.value == nil) != (second.value == nil) else { return }
        let (missing, given) = first.value == nil ? (first.key, second.key) : (second.key, first.key)
        throw ConfigError("\(path).\(missing): expected a file with \(given), got null")
    }

    /// A file path or null: non-empty, no control characters (the `dataDirectory` rule).
    fileprivate func optionalPath() throws(ConfigError) -> String? {
        guard let text = try optionalString() else { return nil }
        guard OutboxConfig.isValidDataDirectory(text) else { throw invalid("non-empty path, or null") }
        return text
    }

    fileprivate func probePath() throws(ConfigError) -> String? {
        guard let text = try optionalString() else { return nil }
        guard text.hasPrefix("/"), text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") }) else {
            throw invalid("path starting with \"/\", or null")
        }
        return text
    }

    fileprivate func pathPrefix() throws(ConfigError) -> String {
        let text = try string()
        guard text.hasPrefix("/"), !text.hasSuffix("/"),
              text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        else { throw invalid("path starting with \"/\" and not ending with \"/\"") }
        return text
    }

    /// `*`, `*.suffix` or a host; stored lowercased and IPv6 without brackets, the form
    /// `ForwardProxy.allowsHost` compares against.
    fileprivate func allowedHost() throws(ConfigError) -> String {
        var text = try string().lowercased()
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        let valid = text == "*"
            || (text.hasPrefix("*.") && HostSyntax.isNameOrIPv4(text.dropFirst(2)))
            || HostSyntax.isNameOrIPv4(text)
            || HostSyntax.isIPv6(text)
        guard valid else { throw invalid("host, \"*.suffix\" or \"*\"") }
        return text
    }
}

extension CredentialRule {
    fileprivate init(_ object: ConfigField) throws(ConfigError) {
        var scope: Scope?
        var originText = ""
        var headers: [String]?
        var source: Source?
        var command: [String]?
        var timeoutSeconds: Double = 10
        for (key, field) in try object.members() {
            switch key {
            case "origin":
                originText = try field.string()
                if originText.contains("://") {
                    // One origin exactly: scheme, host and port, no path.
                    guard let url = UpstreamURL.parse(originText), url.basePath.isEmpty else {
                        throw field.invalid("an origin URL (scheme://host[:port]), a host, \"*.suffix\" or \"*\"")
                    }
                    scope = .origin(url.origin)
                } else {
                    scope = .hosts(OutboxConfig.HostPatterns([try field.allowedHost()]))
                }
            case "headers":
                let names = try field.array().map { (entry) throws(ConfigError) in try entry.token("header name").lowercased() }
                guard !names.isEmpty else { throw field.invalid("at least one header name") }
                headers = names
            case "from": source = try field.enumeration(Source.self)
            case "command":
                let words = try field.array().map { (entry) throws(ConfigError) in try entry.string() }
                guard let program = words.first, !program.isEmpty, !words.contains(where: { $0.utf8.contains(0) }) else {
                    throw field.invalid("the program and its arguments, the program not empty")
                }
                command = words
            case "timeoutSeconds":
                timeoutSeconds = try field.seconds()
                guard timeoutSeconds > 0 else { throw field.invalid("seconds > 0") }
            default: throw field.unknownKey()
            }
        }
        guard let scope else { throw object.error("origin: required") }
        guard let headers else { throw object.error("headers: required") }
        guard let source else { throw object.error("from: required (client or command)") }
        switch source {
        case .command where command == nil: throw object.error("command: required with from \"command\"")
        case .client where command != nil: throw object.error("command: only with from \"command\"")
        default: break
        }
        self.init(scope: scope, originText: originText, headers: headers, source: source, command: command ?? [],
                  timeoutSeconds: timeoutSeconds)
    }
}
