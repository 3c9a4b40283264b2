import OutboxConfig
import OutboxModel
import Testing

/// The config keys of the PostgreSQL store (SPEC §9) and of replay credentials (SPEC §10): what
/// they accept, and one clear message naming the key for what they do not; a connection string
/// is never echoed (it may hold a password).
@Suite("Config: queue.store, queue.postgres, replay.authStatuses and replay.credentials")
struct ConfigStoreAndCredentialsTests {
    @Test func thePostgresStoreAndItsSettingsParse() throws {
        let config = try parseConfig("""
            {"queue": {"store": "postgres", "postgres": {"url": "postgresql://outbox:s3cret@db/outbox", "schema": "Outbox 1",
                       "maxConnections": 8, "leaseSeconds": 2.5, "instanceName": "gw-1"}}}
            """)
        #expect(config.queue.store == .postgres)
        #expect(config.queue.postgres.url == "postgresql://outbox:s3cret@db/outbox")
        #expect(config.queue.postgres.schema == "Outbox 1")
        #expect(config.queue.postgres.maxConnections == 8)
        #expect(config.queue.postgres.leaseSeconds == 2.5)
        #expect(config.queue.postgres.instanceName == "gw-1")
        // Shown by default as [set]; the service shows libpq's reading with the password as [set].
        #expect(config.effectiveJSON().contains(#""url": "[set]""#))
        #expect(!config.effectiveJSON().contains("s3cret"))
    }

    @Test(arguments: [
        (#"{"queue": {"store": "mysql"}}"#, #"queue.store: expected one of local, postgres, got "mysql""#),
        (#"{"queue": {"postgres": {"url": ""}}}"#, "queue.postgres.url: expected a non-empty connection string without NUL or line breaks"),
        (#"{"queue": {"postgres": {"schema": ""}}}"#, #"queue.postgres.schema: expected a schema name of 1 to 63 bytes without NUL, got """#),
        (#"{"queue": {"postgres": {"maxConnections": 1}}}"#, "queue.postgres.maxConnections: expected integer 2-100, got 1"),
        (#"{"queue": {"postgres": {"leaseSeconds": 0.1}}}"#, "queue.postgres.leaseSeconds: expected seconds between 0.5 and 3600, got 0.1"),
        (#"{"queue": {"postgres": {"leaseSeconds": 1e300}}}"#, "queue.postgres.leaseSeconds: expected seconds between 0.5 and 3600, got 1e+300"),
        (#"{"queue": {"postgres": {"port": 5432}}}"#, "queue.postgres.port: unknown key"),
        (#"{"replay": {"authStatuses": [200]}}"#, "replay.authStatuses[0]: expected status 400-599, got 200"),
        (#"{"replay": {"credentials": [{"headers": ["authorization"], "from": "client"}]}}"#, "replay.credentials[0]: origin: required"),
        (#"{"replay": {"credentials": [{"origin": "*", "from": "client"}]}}"#, "replay.credentials[0]: headers: required"),
        (#"{"replay": {"credentials": [{"origin": "*", "headers": []}]}}"#, "replay.credentials[0].headers: expected at least one header name"),
        (#"{"replay": {"credentials": [{"origin": "*", "headers": ["a b"], "from": "client"}]}}"#, "replay.credentials[0].headers[0]: expected header name"),
        (#"{"replay": {"credentials": [{"origin": "*", "headers": ["x"], "from": "vault"}]}}"#, "replay.credentials[0].from: expected one of client, command"),
        (#"{"replay": {"credentials": [{"origin": "*", "headers": ["x"], "from": "command"}]}}"#, #"replay.credentials[0]: command: required with from "command""#),
        (#"{"replay": {"credentials": [{"origin": "*", "headers": ["x"], "from": "client", "command": ["/bin/true"]}]}}"#,
         #"replay.credentials[0]: command: only with from "command""#),
        (#"{"replay": {"credentials": [{"origin": "*", "headers": ["x"], "from": "command", "command": []}]}}"#,
         "replay.credentials[0].command: expected the program and its arguments, the program not empty"),
        (#"{"replay": {"credentials": [{"origin": "https://a.example/path", "headers": ["x"], "from": "client"}]}}"#,
         "replay.credentials[0].origin: expected an origin URL"),
        (#"{"replay": {"credentials": [{"origin": "*", "headers": ["x"], "from": "command", "command": ["t"], "timeoutSeconds": 0}]}}"#,
         "replay.credentials[0].timeoutSeconds: expected seconds > 0, got 0"),
    ])
    func aBadValueIsRefusedNamingItsKey(json: String, message: String) {
        let found = configErrorMessage(json)
        #expect(found?.hasPrefix(message) == true, "\(found ?? "accepted")")
    }

    @Test func aCredentialRuleCoversItsHostsOrItsOneOrigin() throws {
        let config = try parseConfig("""
            {"replay": {"credentials": [
              {"origin": "https://api.example.com", "headers": ["Authorization"], "from": "client"},
              {"origin": "*.internal", "headers": ["authorization", "x-api-key"], "from": "command",
               "command": ["/usr/local/bin/get-token", "--audience", "orders"], "timeoutSeconds": 2.5}]}}
            """)
        let rules = config.replay.credentials
        #expect(rules.map(\.headers) == [["authorization"], ["authorization", "x-api-key"]])
        #expect(rules[1].command == ["/usr/local/bin/get-token", "--audience", "orders"])
        #expect(rules[1].timeoutSeconds == 2.5)
        let api = Origin(scheme: .https, host: "api.example.com", port: 443)
        #expect(rules.rule(for: api)?.source == .client)
        #expect(rules.rule(for: Origin(scheme: .http, host: "api.example.com", port: 80)) == nil, "another scheme is another origin")
        #expect(rules.rule(for: Origin(scheme: .http, host: "billing.internal", port: 8080))?.source == .command)
        #expect(rules.rule(for: Origin(scheme: .http, host: "internal", port: 80)) == nil)
        // The effective config says the same again.
        #expect(try parseConfig(config.effectiveJSON()).replay.credentials == rules)
    }
}
