import Foundation
import OutboxConfig
import Testing

/// A directory of config files, removed when the test ends.
final class ConfigFiles {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("outbox-config-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Writes `json` to `name` and returns its path.
    func write(_ name: String, _ json: String) throws -> String {
        let url = directory.appendingPathComponent(name)
        try Data(json.utf8).write(to: url)
        return url.path
    }
}

func loadError(_ options: CommandLineOptions, _ environment: [String: String] = [:]) -> String? {
    do {
        _ = try ConfigLoader.load(options, environment: environment)
        return nil
    } catch {
        return error.message
    }
}

@Suite("ConfigLoader.load")
struct ConfigLoaderTests {
    @Test("without a file, flags or environment the config is the defaults")
    func defaults() throws {
        #expect(try ConfigLoader.load(CommandLineOptions(), environment: [:]) == OutboxConfig())
        #expect(try ConfigLoader.load(CommandLineOptions(), environment: ["OUTBOX_CONFIG": "", "OUTBOX_ADMIN_TOKEN": ""]) == OutboxConfig())
    }

    @Test("OUTBOX_CONFIG names the file when --config is absent, and --config beats it")
    func configFlagBeatsEnvironment() throws {
        let files = try ConfigFiles()
        let fromEnvironment = try files.write("env.json", #"{"dataDirectory": "/from-env"}"#)
        let fromFlag = try files.write("flag.json", #"{"dataDirectory": "/from-flag"}"#)
        let environment = ["OUTBOX_CONFIG": fromEnvironment]
        #expect(try ConfigLoader.load(CommandLineOptions(), environment: environment).dataDirectory == "/from-env")
        #expect(try ConfigLoader.load(CommandLineOptions(configPath: fromFlag), environment: environment).dataDirectory == "/from-flag")
    }

    @Test("each flag beats the file's value and leaves the other keys alone")
    func flagsBeatFile() throws {
        let files = try ConfigFiles()
        let path = try files.write("config.json", #"""
            {"listen": "127.0.0.1:1", "upstream": "http://file.example", "dataDirectory": "/file",
             "logLevel": "error", "queue": {"maxBodyBytes": 5}}
            """#)
        let fileOnly = try ConfigLoader.load(CommandLineOptions(configPath: path), environment: [:])
        #expect(fileOnly.listen == SocketAddressSpec(host: "127.0.0.1", port: 1))
        #expect(fileOnly.logLevel == .error)
        let options = CommandLineOptions(
            configPath: path, listen: "127.0.0.1:0", upstream: "https://flag.example/base",
            dataDirectory: "/flag", logLevel: "debug")
        let config = try ConfigLoader.load(options, environment: [:])
        #expect(config.listen == SocketAddressSpec(host: "127.0.0.1", port: 0))
        #expect(config.upstream == UpstreamURL(scheme: .https, host: "flag.example", port: 443, basePath: "/base"))
        #expect(config.dataDirectory == "/flag")
        #expect(config.logLevel == .debug)
        #expect(config.queue.maxBodyBytes == 5)
    }

    @Test("OUTBOX_ADMIN_TOKEN beats admin.token from the file")
    func environmentTokenBeatsFile() throws {
        let files = try ConfigFiles()
        let path = try files.write("config.json", #"{"admin": {"token": "from-file"}}"#)
        let options = CommandLineOptions(configPath: path)
        #expect(try ConfigLoader.load(options, environment: [:]).admin.token == "from-file")
        #expect(try ConfigLoader.load(options, environment: ["OUTBOX_ADMIN_TOKEN": "from-env"]).admin.token == "from-env")
        #expect(try ConfigLoader.load(options, environment: ["OUTBOX_ADMIN_TOKEN": ""]).admin.token == "from-file")
    }

    @Test("an invalid OUTBOX_ADMIN_TOKEN is refused without echoing it")
    func invalidEnvironmentTokenNotEchoed() {
        let message = loadError(CommandLineOptions(), ["OUTBOX_ADMIN_TOKEN": "secret with spaces"])
        #expect(message == "OUTBOX_ADMIN_TOKEN: expected visible ASCII without spaces")
    }

    @Test("a bad flag value is an error naming the flag", arguments: [
        (CommandLineOptions(listen: "x"), #"--listen: expected HOST:PORT, got "x""#),
        (CommandLineOptions(upstream: "ftp://x"), #"--upstream: expected http:// or https:// URL without query or fragment, got "ftp://x""#),
        (CommandLineOptions(dataDirectory: ""), #"--data-dir: expected non-empty path, got """#),
        (CommandLineOptions(logLevel: "loud"), #"--log-level: expected one of debug, info, warn, error, got "loud""#),
    ])
    func badFlagValueNamesFlag(options: CommandLineOptions, message: String) {
        #expect(loadError(options) == message)
    }

    @Test("a missing file, a directory, invalid JSON and a bad key each name the file")
    func fileErrorsNameFile() throws {
        let files = try ConfigFiles()
        let missing = files.directory.appendingPathComponent("missing.json").path
        #expect(loadError(CommandLineOptions(configPath: missing)) == "\(missing): cannot read config file: No such file or directory")
        #expect(loadError(CommandLineOptions(), ["OUTBOX_CONFIG": missing]) == "\(missing): cannot read config file: No such file or directory")
        let directory = files.directory.path
        #expect(loadError(CommandLineOptions(configPath: directory)) == "\(directory): cannot read config file: Is a directory")
        let broken = try files.write("broken.json", "{\n  \"listen\": \"127.0.0.1:1\"\n  \"queue\": {}\n}")
        #expect(loadError(CommandLineOptions(configPath: broken)) == "\(broken): invalid JSON at line 3, column 3: unexpected '\"', expected ',' or '}'")
        let wrongType = try files.write("wrong.json", #"{"queue": {"maxBodyBytes": "big"}}"#)
        #expect(loadError(CommandLineOptions(configPath: wrongType)) == "\(wrongType): queue.maxBodyBytes: expected integer")
    }

    @Test("admin.listen equal to the effective listen address is refused naming admin.listen")
    func adminListenMustDifferFromListen() throws {
        let files = try ConfigFiles()
        let same = try files.write("same.json", #"{"listen": "127.0.0.1:8080", "admin": {"listen": "127.0.0.1:8080"}}"#)
        #expect(loadError(CommandLineOptions(configPath: same))
                == #"admin.listen: expected an address other than listen, got "127.0.0.1:8080""#)
        // The flag moves the main listener away, so the pair no longer collides.
        let moved = try ConfigLoader.load(CommandLineOptions(configPath: same, listen: "127.0.0.1:8081"), environment: [:])
        #expect(moved.admin.listen == SocketAddressSpec(host: "127.0.0.1", port: 8080))
        // And the other way round: the flag moves the main listener onto the admin address.
        let admin = try files.write("admin.json", #"{"admin": {"listen": "LOCALHOST:9000"}}"#)
        #expect(loadError(CommandLineOptions(configPath: admin, listen: "localhost:9000"))
                == #"admin.listen: expected an address other than listen, got "LOCALHOST:9000""#)
        // Port 0 on both: each listener is given its own free port.
        let bothFree = try files.write("free.json", #"{"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}}"#)
        #expect(try ConfigLoader.load(CommandLineOptions(configPath: bothFree), environment: [:]).admin.listen?.port == 0)
    }

    @Test("every file a tls key names must be readable: an error names the key, the file and the reason",
          arguments: ["caFile", "clientCertificateFile", "clientKeyFile", "intercept.caCertificateFile", "intercept.caKeyFile"])
    func unreadableTLSFileNamesItsKey(key: String) throws {
        let files = try ConfigFiles()
        let readable = try files.write("readable.pem", "-----BEGIN CERTIFICATE-----\n")
        let missing = files.directory.appendingPathComponent("missing.pem").path
        // Paired keys need their partner; the partner is readable, so only `key` can fail.
        func config(_ path: String) throws -> String {
            let parts = key.split(separator: ".").map(String.init)
            var tls: [String: Any] = [:]
            if parts.count == 2 {
                let partner = parts[1] == "caKeyFile" ? "caCertificateFile" : "caKeyFile"
                tls["intercept"] = [parts[1]: path, partner: readable]
            } else {
                tls[key] = path
                if key != "caFile" { tls[key == "clientKeyFile" ? "clientCertificateFile" : "clientKeyFile"] = readable }
            }
            let data = try JSONSerialization.data(withJSONObject: ["tls": tls])
            return String(decoding: data, as: UTF8.self)
        }
        let good = try files.write("good.json", try config(readable))
        #expect(loadError(CommandLineOptions(configPath: good)) == nil)
        let bad = try files.write("bad.json", try config(missing))
        #expect(loadError(CommandLineOptions(configPath: bad)) == "tls.\(key): cannot read \(missing): No such file or directory")
        let directory = try files.write("directory.json", try config(files.directory.path))
        #expect(loadError(CommandLineOptions(configPath: directory))
                == "tls.\(key): cannot read \(files.directory.path): Is a directory")
    }

    @Test("a file errors before any flag is looked at, so the file's problem is reported first")
    func fileErrorBeforeFlagError() throws {
        let files = try ConfigFiles()
        let path = try files.write("config.json", #"{"retrie": {}}"#)
        #expect(loadError(CommandLineOptions(configPath: path, listen: "x")) == "\(path): retrie: unknown key")
    }
}
