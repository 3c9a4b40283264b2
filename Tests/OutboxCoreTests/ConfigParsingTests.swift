import Foundation
import OutboxConfig
import Testing

/// Parses `json` and returns the error message, or nil when the document was accepted.
func configErrorMessage(_ json: String) -> String? {
    do {
        _ = try OutboxConfig.parse(json: Array(json.utf8))
        return nil
    } catch {
        return error.message
    }
}

func parseConfig(_ json: String) throws -> OutboxConfig {
    try OutboxConfig.parse(json: Array(json.utf8))
}

@Suite("OutboxConfig.parse")
struct ConfigParsingTests {
    @Test("config.example.json is the defaults plus its upstream")
    func specExampleIsDefaultsPlusUpstream() throws {
        let exampleURL = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("config.example.json")
        let bytes = try [UInt8](Data(contentsOf: exampleURL))
        var expected = OutboxConfig()
        expected.upstream = UpstreamURL(scheme: .http, host: "127.0.0.1", port: 9000)
        #expect(try OutboxConfig.parse(json: bytes) == expected)
    }

    @Test("an empty object gives every default")
    func emptyObjectGivesDefaults() throws {
        #expect(try parseConfig("{}") == OutboxConfig())
        #expect(try parseConfig(" \n{ }\n") == OutboxConfig())
    }

    @Test("a value of the wrong type names its key path", arguments: [
        (#"{"listen": 8080}"#, "listen: expected string"),
        (#"{"upstream": 5}"#, "upstream: expected string or null"),
        (#"{"dataDirectory": true}"#, "dataDirectory: expected string"),
        (#"{"logLevel": 1}"#, "logLevel: expected string"),
        (#"{"forwardProxy": []}"#, "forwardProxy: expected object"),
        (#"{"forwardProxy": {"enabled": "yes"}}"#, "forwardProxy.enabled: expected boolean"),
        (#"{"forwardProxy": {"enabled": 1}}"#, "forwardProxy.enabled: expected boolean"),
        (#"{"forwardProxy": {"allowedHosts": "*"}}"#, "forwardProxy.allowedHosts: expected array"),
        (#"{"forwardProxy": {"allowedHosts": [1]}}"#, "forwardProxy.allowedHosts[0]: expected string"),
        (#"{"forwardProxy": {"connectPorts": [443, "80"]}}"#, "forwardProxy.connectPorts[1]: expected integer"),
        (#"{"queue": null}"#, "queue: expected object"),
        (#"{"queue": {"methods": ["POST", 1]}}"#, "queue.methods[1]: expected string"),
        (#"{"queue": {"maxBodyBytes": "10"}}"#, "queue.maxBodyBytes: expected integer"),
        (#"{"queue": {"maxBodyBytes": 1.5}}"#, "queue.maxBodyBytes: expected integer"),
        (#"{"queue": {"maxBodyBytes": true}}"#, "queue.maxBodyBytes: expected integer"),
        (#"{"queue": {"maxOperations": 1e6}}"#, "queue.maxOperations: expected integer"),
        (#"{"queue": {"ttlSeconds": "1"}}"#, "queue.ttlSeconds: expected number"),
        (#"{"queue": {"ttlSeconds": true}}"#, "queue.ttlSeconds: expected number"),
        (#"{"queue": {"completedRetentionSeconds": null}}"#, "queue.completedRetentionSeconds: expected number"),
        (#"{"queue": {"unavailableStatuses": [502.0]}}"#, "queue.unavailableStatuses[0]: expected integer"),
        (#"{"replay": []}"#, "replay: expected object"),
        (#"{"replay": {"maxConcurrentPerOrigin": 2.5}}"#, "replay.maxConcurrentPerOrigin: expected integer"),
        (#"{"retry": {"preset": 1}}"#, "retry.preset: expected string"),
        (#"{"retry": {"maxRetries": 2.5}}"#, "retry.maxRetries: expected integer"),
        (#"{"retry": {"baseDelaySeconds": "1"}}"#, "retry.baseDelaySeconds: expected number"),
        (#"{"retry": {"multiplier": false}}"#, "retry.multiplier: expected number"),
        (#"{"retry": {"maxDelaySeconds": []}}"#, "retry.maxDelaySeconds: expected number"),
        (#"{"retry": {"jitter": 1}}"#, "retry.jitter: expected boolean"),
        (#"{"retry": {"retryableStatuses": {}}}"#, "retry.retryableStatuses: expected array"),
        (#"{"reachability": {"probeIntervalSeconds": "2"}}"#, "reachability.probeIntervalSeconds: expected number"),
        (#"{"reachability": {"probePath": 1}}"#, "reachability.probePath: expected string or null"),
        (#"{"reachability": {"connectTimeoutSeconds": null}}"#, "reachability.connectTimeoutSeconds: expected number"),
        (#"{"reachability": {"responseTimeoutSeconds": {}}}"#, "reachability.responseTimeoutSeconds: expected number"),
        (#"{"idempotency": {"header": null}}"#, "idempotency.header: expected string"),
        (#"{"admin": {"pathPrefix": 1}}"#, "admin.pathPrefix: expected string"),
        (#"{"admin": {"listen": 8081}}"#, "admin.listen: expected string or null"),
        (#"{"admin": {"token": 1}}"#, "admin.token: expected string or null"),
        (#"{"admin": {"redactHeaders": ["cookie", 2]}}"#, "admin.redactHeaders[1]: expected string"),
        (#"{"limits": {"maxHeaderBytes": 1.0}}"#, "limits.maxHeaderBytes: expected integer"),
        (#"{"limits": {"headerTimeoutSeconds": "10"}}"#, "limits.headerTimeoutSeconds: expected number"),
        (#"{"limits": {"idleTimeoutSeconds": false}}"#, "limits.idleTimeoutSeconds: expected number"),
        (#"{"limits": {"maxConnections": "4096"}}"#, "limits.maxConnections: expected integer"),
        (#"{"limits": {"shutdownTimeoutSeconds": "10"}}"#, "limits.shutdownTimeoutSeconds: expected number"),
        (#"[]"#, "expected a JSON object at the top level"),
        (#""listen""#, "expected a JSON object at the top level"),
    ])
    func wrongTypeNamesKey(json: String, message: String) {
        #expect(configErrorMessage(json) == message)
    }

    @Test("an unknown key at any depth names its path", arguments: [
        (#"{"retrie": {}}"#, "retrie: unknown key"),
        (#"{"listen": "127.0.0.1:1", "Listen": "127.0.0.1:2"}"#, "Listen: unknown key"),
        (#"{"forwardProxy": {"allowedHost": []}}"#, "forwardProxy.allowedHost: unknown key"),
        (#"{"queue": {"maxBodyByte": 1}}"#, "queue.maxBodyByte: unknown key"),
        (#"{"replay": {"maxConcurrent": 2}}"#, "replay.maxConcurrent: unknown key"),
        (#"{"retry": {"preset": "default", "retries": 1}}"#, "retry.retries: unknown key"),
        (#"{"reachability": {"probeInterval": 1}}"#, "reachability.probeInterval: unknown key"),
        (#"{"idempotency": {"headerName": "X"}}"#, "idempotency.headerName: unknown key"),
        (#"{"admin": {"tokens": null}}"#, "admin.tokens: unknown key"),
        (#"{"limits": {"shutdownTimeout": 1}}"#, "limits.shutdownTimeout: unknown key"),
    ])
    func unknownKeyNamesPath(json: String, message: String) {
        #expect(configErrorMessage(json) == message)
    }

    @Test("the first problem in document order is the one reported")
    func firstProblemWins() {
        #expect(configErrorMessage(#"{"queue": {"maxBodyBytes": "x"}, "retrie": 1}"#) == "queue.maxBodyBytes: expected integer")
        #expect(configErrorMessage(#"{"retrie": 1, "queue": {"maxBodyBytes": "x"}}"#) == "retrie: unknown key")
    }

    @Test("values of the right type but out of range name the key and what was found", arguments: [
        (#"{"listen": "localhost"}"#, #"listen: expected "host:port", got "localhost""#),
        (#"{"listen": "127.0.0.1:65536"}"#, #"listen: expected "host:port", got "127.0.0.1:65536""#),
        (#"{"upstream": "ftp://x"}"#, #"upstream: expected http:// or https:// URL without query or fragment, got "ftp://x""#),
        (#"{"dataDirectory": ""}"#, #"dataDirectory: expected non-empty path, got """#),
        (#"{"logLevel": "verbose"}"#, #"logLevel: expected one of debug, info, warn, error, got "verbose""#),
        (#"{"forwardProxy": {"allowedHosts": ["a b"]}}"#, #"forwardProxy.allowedHosts[0]: expected host, "*.suffix" or "*", got "a b""#),
        (#"{"forwardProxy": {"allowedHosts": ["*example.com"]}}"#, #"forwardProxy.allowedHosts[0]: expected host, "*.suffix" or "*", got "*example.com""#),
        (#"{"forwardProxy": {"connectPorts": [0]}}"#, "forwardProxy.connectPorts[0]: expected port 1-65535, got 0"),
        (#"{"forwardProxy": {"connectPorts": [65536]}}"#, "forwardProxy.connectPorts[0]: expected port 1-65535, got 65536"),
        (#"{"queue": {"methods": ["PO ST"]}}"#, #"queue.methods[0]: expected method token, got "PO ST""#),
        (#"{"queue": {"methods": [""]}}"#, #"queue.methods[0]: expected method token, got """#),
        (#"{"queue": {"maxBodyBytes": 0}}"#, "queue.maxBodyBytes: expected integer >= 1, got 0"),
        (#"{"replay": {"maxConcurrentPerOrigin": 0}}"#, "replay.maxConcurrentPerOrigin: expected integer >= 1, got 0"),
        (#"{"replay": {"attemptTimeoutSeconds": 0}}"#, "replay.attemptTimeoutSeconds: expected seconds > 0, got 0"),
        (#"{"replay": {"attemptTimeoutSeconds": -1}}"#, "replay.attemptTimeoutSeconds: expected seconds between 0 and 1000000000, got -1"),
        (#"{"queue": {"maxOperations": -1}}"#, "queue.maxOperations: expected integer >= 1, got -1"),
        (#"{"queue": {"ttlSeconds": -1}}"#, "queue.ttlSeconds: expected seconds between 0 and 1000000000, got -1"),
        (#"{"queue": {"completedRetentionSeconds": 1e10}}"#, "queue.completedRetentionSeconds: expected seconds between 0 and 1000000000, got 10000000000"),
        (#"{"queue": {"unavailableStatuses": [99]}}"#, "queue.unavailableStatuses[0]: expected status 100-599, got 99"),
        (#"{"retry": {"preset": "fast"}}"#, #"retry.preset: expected one of default, aggressive, conservative, linear, immediate, got "fast""#),
        (#"{"retry": {"maxRetries": -1}}"#, "retry.maxRetries: expected integer >= 0, got -1"),
        (#"{"retry": {"multiplier": 0.5}}"#, "retry.multiplier: expected number 1-1000, got 0.5"),
        (#"{"retry": {"baseDelaySeconds": -0.1}}"#, "retry.baseDelaySeconds: expected seconds between 0 and 1000000000, got -0.1"),
        (#"{"retry": {"retryableStatuses": [429, 600]}}"#, "retry.retryableStatuses[1]: expected status 100-599, got 600"),
        (#"{"reachability": {"probePath": "health"}}"#, #"reachability.probePath: expected path starting with "/", or null, got "health""#),
        (#"{"idempotency": {"header": "Idem Key"}}"#, #"idempotency.header: expected header name token, got "Idem Key""#),
        (#"{"admin": {"pathPrefix": "admin"}}"#, #"admin.pathPrefix: expected path starting with "/" and not ending with "/", got "admin""#),
        (#"{"admin": {"pathPrefix": "/admin/"}}"#, #"admin.pathPrefix: expected path starting with "/" and not ending with "/", got "/admin/""#),
        (#"{"admin": {"pathPrefix": "/"}}"#, #"admin.pathPrefix: expected path starting with "/" and not ending with "/", got "/""#),
        (#"{"admin": {"listen": "localhost"}}"#, #"admin.listen: expected "host:port" or null, got "localhost""#),
        (#"{"admin": {"listen": "127.0.0.1:65536"}}"#, #"admin.listen: expected "host:port" or null, got "127.0.0.1:65536""#),
        (#"{"admin": {"listen": ""}}"#, #"admin.listen: expected "host:port" or null, got """#),
        (#"{"admin": {"token": ""}}"#, "admin.token: expected visible ASCII without spaces, or null"),
        (#"{"admin": {"token": "two words"}}"#, "admin.token: expected visible ASCII without spaces, or null"),
        (#"{"admin": {"redactHeaders": ["x y"]}}"#, #"admin.redactHeaders[0]: expected header name token, got "x y""#),
        (#"{"limits": {"maxHeaderBytes": 0}}"#, "limits.maxHeaderBytes: expected integer >= 1, got 0"),
        (#"{"limits": {"maxConnections": 0}}"#, "limits.maxConnections: expected integer >= 1, got 0"),
    ])
    func outOfRangeNamesKeyAndValue(json: String, message: String) {
        #expect(configErrorMessage(json) == message)
    }

    @Test("edge values that are valid are kept, hosts and redacted headers normalised")
    func validEdgeValues() throws {
        let config = try parseConfig(#"""
            {
              "listen": "[::1]:0",
              "upstream": null,
              "forwardProxy": { "allowedHosts": ["API.Example.com", "*.Local", "[::1]", "10.0.0.1", "*"], "connectPorts": [] },
              "queue": { "methods": ["POST", "PROPPATCH"], "ttlSeconds": 0, "unavailableStatuses": [] },
              "retry": { "maxRetries": 0, "multiplier": 1 },
              "reachability": { "probePath": "/health?full=1" },
              "admin": { "pathPrefix": "/ops/admin", "token": "s3cr3t-Token_1", "redactHeaders": ["X-Api-Key"] }
            }
            """#)
        #expect(config.listen == SocketAddressSpec(host: "::1", port: 0))
        #expect(config.upstream == nil)
        #expect(config.forwardProxy.allowedHosts == ["api.example.com", "*.local", "::1", "10.0.0.1", "*"])
        #expect(config.forwardProxy.connectPorts == [])
        #expect(config.queue.methods == ["POST", "PROPPATCH"])
        #expect(config.queue.ttlSeconds == 0)
        #expect(config.queue.unavailableStatuses == [])
        #expect(config.retry.maxRetries == 0)
        #expect(config.retry.multiplier == 1)
        #expect(config.reachability.probePath == "/health?full=1")
        #expect(config.admin.pathPrefix == "/ops/admin")
        #expect(config.admin.token == "s3cr3t-Token_1")
        #expect(config.admin.redactHeaders == ["x-api-key"])
    }

    @Test("admin.listen is null by default and otherwise a host:port, port 0 and IPv6 included")
    func adminListen() throws {
        #expect(try parseConfig(#"{"admin": {"listen": null}}"#).admin.listen == nil)
        #expect(try parseConfig(#"{"admin": {"listen": "127.0.0.1:0"}}"#).admin.listen
                == SocketAddressSpec(host: "127.0.0.1", port: 0))
        #expect(try parseConfig(#"{"admin": {"listen": "[::1]:9090"}}"#).admin.listen
                == SocketAddressSpec(host: "::1", port: 9090))
    }

    @Test("tls keys are read, intercept hosts normalised like allowedHosts")
    func tlsKeys() throws {
        let tls = try parseConfig(#"""
            {"tls": {"caFile": "/etc/extra.pem", "verify": false, "clientCertificateFile": "c.pem",
                     "clientKeyFile": "k.pem",
                     "intercept": {"hosts": ["API.example.com", "*.Example.org", "[::1]"],
                                   "caCertificateFile": "ca.pem", "caKeyFile": "ca-key.pem"}}}
            """#).tls
        #expect(tls.caFile == "/etc/extra.pem")
        #expect(!tls.verify)
        #expect(tls.clientCertificateFile == "c.pem" && tls.clientKeyFile == "k.pem")
        #expect(tls.intercept.hosts == ["api.example.com", "*.example.org", "::1"])
        #expect(tls.intercept.caCertificateFile == "ca.pem" && tls.intercept.caKeyFile == "ca-key.pem")
    }

    @Test("a tls file without its partner, a bad intercept pattern and a wrong type name the key", arguments: [
        (#"{"tls": {"clientCertificateFile": "c.pem"}}"#, "tls.clientKeyFile: expected a file with clientCertificateFile, got null"),
        (#"{"tls": {"clientKeyFile": "k.pem"}}"#, "tls.clientCertificateFile: expected a file with clientKeyFile, got null"),
        (#"{"tls": {"intercept": {"caKeyFile": "k.pem"}}}"#, "tls.intercept.caCertificateFile: expected a file with caKeyFile, got null"),
        (#"{"tls": {"intercept": {"hosts": ["a b"]}}}"#, #"tls.intercept.hosts[0]: expected host, "*.suffix" or "*", got "a b""#),
        (#"{"tls": {"verify": "no"}}"#, "tls.verify: expected boolean"),
        (#"{"tls": {"caFile": ""}}"#, #"tls.caFile: expected non-empty path, or null, got """#),
        (#"{"tls": {"cafile": null}}"#, "tls.cafile: unknown key"),
    ])
    func tlsErrors(json: String, message: String) {
        #expect(configErrorMessage(json) == message)
    }

    @Test("the extension keys logLevel and limits.shutdownTimeoutSeconds are read")
    func extensionKeys() throws {
        let config = try parseConfig(#"{"logLevel": "debug", "limits": {"shutdownTimeoutSeconds": 0.5}}"#)
        #expect(config.logLevel == .debug)
        #expect(config.limits.shutdownTimeoutSeconds == 0.5)
    }

    @Test("each retry preset supplies its values", arguments: [
        ("default", 5, 1.0, 2.0, 60.0, true),
        ("aggressive", 10, 0.5, 1.5, 30.0, true),
        ("conservative", 3, 5.0, 3.0, 120.0, true),
        ("linear", 5, 5.0, 1.0, 5.0, false),
        ("immediate", 3, 0.1, 1.0, 0.1, false),
    ])
    func presetValues(name: String, retries: Int, base: Double, multiplier: Double, cap: Double, jitter: Bool) throws {
        let retry = try parseConfig(#"{"retry": {"preset": "\#(name)"}}"#).retry
        #expect(retry.preset.rawValue == name)
        #expect(retry.maxRetries == retries)
        #expect(retry.baseDelaySeconds == base)
        #expect(retry.multiplier == multiplier)
        #expect(retry.maxDelaySeconds == cap)
        #expect(retry.jitter == jitter)
        #expect(retry.retryableStatuses == OutboxConfig.Retry().retryableStatuses)
    }

    @Test("explicit retry keys override the preset wherever the preset is written")
    func explicitKeysBeatPreset() throws {
        let after = try parseConfig(#"{"retry": {"preset": "aggressive", "maxRetries": 2, "retryableStatuses": [503]}}"#).retry
        #expect(after.preset == .aggressive)
        #expect(after.maxRetries == 2)
        #expect(after.baseDelaySeconds == 0.5)
        #expect(after.retryableStatuses == [503])
        let before = try parseConfig(#"{"retry": {"jitter": true, "maxDelaySeconds": 7, "preset": "linear"}}"#).retry
        #expect(before.preset == .linear)
        #expect(before.jitter == true)
        #expect(before.maxDelaySeconds == 7)
        #expect(before.baseDelaySeconds == 5)
    }

    @Test("every …Seconds key accepts a fraction", arguments: SecondsKey.all)
    func secondsAcceptFractions(key: SecondsKey) throws {
        let config = try parseConfig(#"{"\#(key.section)": {"\#(key.name)": 0.2}}"#)
        #expect(key.read(config) == 0.2)
        let whole = try parseConfig(#"{"\#(key.section)": {"\#(key.name)": 3}}"#)
        #expect(key.read(whole) == 3)
    }

    @Test("invalid JSON is reported with line and column", arguments: [
        ("", "invalid JSON at line 1, column 1: unexpected end of input, expected a value"),
        ("{\n  \"listen\": \"127.0.0.1:1\",\n}", "invalid JSON at line 3, column 1: unexpected '}', expected a string key"),
        ("{\"listen\" \"x\"}", "invalid JSON at line 1, column 11: unexpected '\"', expected ':' after key"),
        ("{\"a\": 1 \"b\": 2}", "a: invalid JSON at line 1, column 9: unexpected '\"', expected ',' or '}'"),
        ("{\"queue\": {\"methods\": [\"POST\",]}}", "queue.methods[1]: invalid JSON at line 1, column 31: unexpected ']', expected a value"),
        ("{} {}", "invalid JSON at line 1, column 4: unexpected '{' after the document"),
        ("// comment\n{}", "invalid JSON at line 1, column 1: unexpected '/', expected a value"),
        ("{\"retry\": {\"maxRetries\": 05}}", "retry.maxRetries: invalid JSON at line 1, column 26: leading zero in number"),
        ("{\"retry\": {\"maxRetries\": NaN}}", "retry.maxRetries: invalid JSON at line 1, column 26: unexpected 'N', expected a value"),
        ("{\"retry\": {\"maxRetries\": 99999999999999999999}}", "retry.maxRetries: invalid JSON at line 1, column 26: integer 99999999999999999999 out of range"),
        ("{\"queue\": {\"ttlSeconds\": 1e999}}", "queue.ttlSeconds: invalid JSON at line 1, column 26: number 1e999 out of range"),
        ("{\"listen\": \"a\tb\"}", "invalid JSON at line 1, column 14: control character in string (write it as an escape)"),
        ("{\"listen\": \"abc", "invalid JSON at line 1, column 12: unterminated string"),
        ("{\"listen\": \"\\x\"}", "invalid JSON at line 1, column 13: invalid escape in string"),
        ("{\"listen\": \"\\ud800\"}", "invalid JSON at line 1, column 19: unpaired surrogate in \\u escape"),
        ("{\"listen\": tru}", "invalid JSON at line 1, column 12: unexpected 't', expected a value"),
    ])
    func syntaxErrorsHaveLineAndColumn(json: String, message: String) {
        #expect(configErrorMessage(json) == message)
    }

    @Test("duplicate keys are an error naming the full key path")
    func duplicateKeys() {
        #expect(configErrorMessage(#"{"listen": "a:1", "listen": "b:2"}"#)
            == #"invalid JSON at line 1, column 19: duplicate key "listen""#)
        #expect(configErrorMessage("{\"queue\": {\n  \"ttlSeconds\": 1,\n  \"ttlSeconds\": 2}}")
            == #"invalid JSON at line 3, column 3: duplicate key "queue.ttlSeconds""#)
    }

    @Test("invalid UTF-8 inside a string is rejected")
    func invalidUTF8() {
        let bytes = Array(#"{"dataDirectory": ""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: ConfigError("invalid JSON at line 1, column 19: invalid UTF-8 in string")) {
            try OutboxConfig.parse(json: bytes)
        }
    }

    @Test("deep nesting is an error, not a stack overflow")
    func deepNesting() {
        let json = #"{"queue": "# + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}"
        #expect(configErrorMessage(json)?.hasSuffix("nesting deeper than 64 levels") == true)
    }

    @Test("escapes, surrogate pairs and a UTF-8 byte order mark are read correctly")
    func escapesAndBOM() throws {
        let json = #"{"dataDirectory": "d\u00e9j\u00E0\/\ud83d\ude00\"q\"", "admin": {"token": "a\\b"}}"#
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array(json.utf8)
        let config = try OutboxConfig.parse(json: bytes)
        #expect(config.dataDirectory == "déjà/😀\"q\"")
        #expect(config.admin.token == #"a\b"#)
    }
}

/// One `…Seconds` key: where it is written and how to read it back.
struct SecondsKey: Sendable, CustomTestStringConvertible {
    let section: String
    let name: String
    let read: @Sendable (OutboxConfig) -> Double

    var testDescription: String { "\(section).\(name)" }

    static let all: [SecondsKey] = [
        SecondsKey(section: "queue", name: "ttlSeconds") { $0.queue.ttlSeconds },
        SecondsKey(section: "queue", name: "completedRetentionSeconds") { $0.queue.completedRetentionSeconds },
        SecondsKey(section: "retry", name: "baseDelaySeconds") { $0.retry.baseDelaySeconds },
        SecondsKey(section: "retry", name: "maxDelaySeconds") { $0.retry.maxDelaySeconds },
        SecondsKey(section: "reachability", name: "probeIntervalSeconds") { $0.reachability.probeIntervalSeconds },
        SecondsKey(section: "reachability", name: "connectTimeoutSeconds") { $0.reachability.connectTimeoutSeconds },
        SecondsKey(section: "reachability", name: "responseTimeoutSeconds") { $0.reachability.responseTimeoutSeconds },
        SecondsKey(section: "limits", name: "headerTimeoutSeconds") { $0.limits.headerTimeoutSeconds },
        SecondsKey(section: "limits", name: "idleTimeoutSeconds") { $0.limits.idleTimeoutSeconds },
        SecondsKey(section: "limits", name: "shutdownTimeoutSeconds") { $0.limits.shutdownTimeoutSeconds },
    ]
}
