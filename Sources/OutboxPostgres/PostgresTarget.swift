import CLibPQ

/// Where a connection string points, without its secrets: host, port, database and user, for
/// log lines, `/admin/status` and `check-config` (SPEC §9: a password never shows). Read with
/// libpq's own parser, so a `postgresql://` URI and `key=value` pairs mean exactly what they
/// mean to the connection; what the string leaves out libpq takes from `PG*` variables and
/// `~/.pgpass` when it connects, and is shown as not set here.
public struct PostgresTarget: Sendable, Equatable, CustomStringConvertible {
    public let host: String?
    public let port: String?
    public let database: String?
    public let user: String?
    /// The string carries a password (shown as `[set]`, never as itself).
    public let hasPassword: Bool

    /// Why a connection string was refused. libpq's message is left out: for a string it cannot
    /// parse, it may quote the part that holds the password.
    public struct Unparsable: Error, Equatable, CustomStringConvertible {
        public var description: String {
            "not a libpq connection string (a postgresql:// URI or key=value pairs); the value is not shown, it may hold a password"
        }
    }

    public init(conninfo: String) throws(Unparsable) {
        let values = try Self.parse(conninfo)
        host = values["host"] ?? values["hostaddr"]
        port = values["port"]
        database = values["dbname"]
        user = values["user"]
        hasPassword = !(values["password"] ?? "").isEmpty
    }

    /// `conninfo` as it may be shown (`check-config`): as written when it holds no password,
    /// else libpq's reading of it as `key=value` pairs with the password as `[set]`.
    public static func shown(_ conninfo: String) -> String {
        guard let values = try? parse(conninfo) else { return "[unparsable: not shown]" }
        guard let password = values["password"], !password.isEmpty else { return conninfo }
        return values.sorted { $0.key < $1.key }.map { key, value in
            let shown = key == "password" ? "[set]" : value
            let plain = !shown.isEmpty && !shown.contains { $0 == " " || $0 == "'" || $0 == "\\" }
            return "\(key)=" + (plain ? shown : "'" + shown.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "'", with: "\\'") + "'")
        }.joined(separator: " ")
    }

    /// The keywords libpq reads from `conninfo` and their values (only those it sets).
    private static func parse(_ conninfo: String) throws(Unparsable) -> [String: String] {
        var message: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &message) else {
            if let message { PQfreemem(message) }
            throw Unparsable()
        }
        defer { PQconninfoFree(options) }
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        return values
    }

    /// `host 127.0.0.1, port 5432, database outbox, user outbox`, each part only when the
    /// string sets it (else libpq's default applies).
    public var description: String {
        let parts = [("host", host), ("port", port), ("database", database), ("user", user)].compactMap { name, value in
            value.map { "\(name) \($0)" }
        }
        return parts.isEmpty ? "libpq defaults" : parts.joined(separator: ", ")
    }
}
