import OutboxConfig
import OutboxModel

/// Where the admin commands send their requests: an `http://` listener, the admin path prefix
/// under it, and the bearer token, resolved the way an operator expects — `--admin URL`, else
/// `OUTBOX_ADMIN_URL`, else the config's `admin.listen` or `listen` (`--config`,
/// `OUTBOX_CONFIG`); the prefix and token always come from the config (`OUTBOX_ADMIN_TOKEN`
/// overriding `admin.token`), so one config file serves the proxy and its commands.
package struct AdminTarget: Sendable, Equatable {
    /// Host to connect to: a name, an IPv4 address or an unbracketed IPv6 address.
    package var host: String
    package var port: Int
    /// `admin.pathPrefix`, e.g. `/admin`.
    package var pathPrefix: String
    package var token: String?

    package init(host: String, port: Int, pathPrefix: String, token: String?) {
        self.host = host
        self.port = port
        self.pathPrefix = pathPrefix
        self.token = token
    }

    /// `http://host:port`, as error messages show it.
    package var baseURL: String { "http://\(HostSyntax.bracketed(host)):\(port)" }

    /// The full URL of `path` (which starts with "/", relative to the prefix), for messages.
    package func url(_ path: String) -> String { baseURL + pathPrefix + path }

    /// Resolves the target; a bad URL or config is a usage error (exit 2) naming its source.
    package static func resolve(_ invocation: AdminInvocation, environment: [String: String]) throws(UsageError) -> AdminTarget {
        let config: OutboxConfig
        do {
            config = try ConfigLoader.load(CommandLineOptions(configPath: invocation.configPath), environment: environment)
        } catch {
            throw UsageError(error.message)
        }
        let given: (text: String, source: String)? =
            invocation.adminURL.map { ($0, "--admin") } ?? environment["OUTBOX_ADMIN_URL"].flatMap { $0.isEmpty ? nil : ($0, "OUTBOX_ADMIN_URL") }
        if let given {
            guard let url = UpstreamURL.parse(given.text), url.scheme == .http, url.basePath.isEmpty else {
                throw UsageError("\(given.source): expected the listener's base URL, like http://127.0.0.1:8080 "
                                 + "(no path: \(config.admin.pathPrefix) is added), got \(JSON.quoted(given.text))")
            }
            return AdminTarget(host: url.host, port: url.port, pathPrefix: config.admin.pathPrefix, token: config.admin.token)
        }
        let (address, key) = config.admin.listen.map { ($0, "admin.listen") } ?? (config.listen, "listen")
        guard address.port != 0 else {
            throw UsageError("\(key) has port 0 (chosen when Outbox starts): pass --admin URL or set OUTBOX_ADMIN_URL")
        }
        return AdminTarget(host: connectable(address.host), port: address.port, pathPrefix: config.admin.pathPrefix,
                           token: config.admin.token)
    }

    /// A listener on every address is reached through loopback.
    private static func connectable(_ host: String) -> String {
        switch host {
        case "0.0.0.0": "127.0.0.1"
        case "::": "::1"
        default: host
        }
    }
}
