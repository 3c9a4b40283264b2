import OutboxConfig
import OutboxModel
import OutboxNet
import OutboxStorage

/// Why Outbox cannot start (or `outbox ca` cannot answer): one line for stderr, naming the
/// config key or file at fault, and the exit status that goes with it (2: the configuration
/// must change; 1: a runtime failure).
public struct ServiceSetupError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public let exitCode: Int32

    init(_ message: String, exitCode: Int32) {
        self.message = message
        self.exitCode = exitCode
    }

    public var description: String { message }
}

extension OutboxService {
    /// `outbox ca`: the interception CA certificate as PEM text, loaded from the configured
    /// files, or from `dataDirectory/ca/` (created there first when missing, or replaced when
    /// `replacing`). Refused when the CA would not cover every `tls.intercept.hosts` pattern,
    /// as `serve` would refuse it.
    public static func interceptionCertificatePEM(config: OutboxConfig, replacing: Bool) throws(ServiceSetupError) -> [UInt8] {
        let intercept = config.tls.intercept
        if replacing, let certificateFile = intercept.caCertificateFile {
            throw ServiceSetupError("outbox ca --force replaces only the CA Outbox creates, and "
                                    + "tls.intercept.caCertificateFile names \(certificateFile)", exitCode: 2)
        }
        return try interceptionCA(config: config, replacing: replacing).certificatePEM
    }

    /// The CA for `config`, loaded or created, or the line and exit status explaining why not.
    static func interceptionCA(config: OutboxConfig, replacing: Bool = false) throws(ServiceSetupError) -> InterceptionCA {
        let intercept = config.tls.intercept
        if let certificateFile = intercept.caCertificateFile, let keyFile = intercept.caKeyFile {
            do {
                return try InterceptionCA.load(certificateFile: certificateFile, keyFile: keyFile, hosts: intercept.hosts)
            } catch {
                throw setupError(error, intercept: intercept)
            }
        }
        if let problem = DataDirectory.prepare(config.dataDirectory) { throw ServiceSetupError(problem, exitCode: 1) }
        do {
            return try InterceptionCA.prepare(in: config.dataDirectory + "/ca", hosts: intercept.hosts, replacing: replacing)
        } catch {
            throw setupError(error, intercept: intercept)
        }
    }

    /// `tlsVerify` always; `interception` with the hosts and the CA's fingerprint when hosts
    /// are intercepted, else `null`.
    static func statusSettings(config: OutboxConfig, interceptionCA: InterceptionCA?) -> [(key: String, value: JSON)] {
        let interception: JSON = interceptionCA.map { authority in
            .object([
                ("hosts", .array(config.tls.intercept.hosts.map { .string($0) })),
                ("caSha256", .string(authority.sha256Fingerprint)),
            ])
        } ?? .null
        return [("tlsVerify", .bool(config.tls.verify)), ("interception", interception)]
    }

    /// One line per error: for configured files, the key that names them (the configuration
    /// must change: 2); for the CA Outbox keeps, what happened to it and that `outbox ca
    /// --force` makes a new one (a runtime failure: 1), except a host outside its constraint,
    /// which only a different configuration (or a new CA) resolves (2).
    static func setupError(_ error: InterceptionCAError, intercept: OutboxConfig.TLS.Intercept) -> ServiceSetupError {
        let configured = intercept.caCertificateFile != nil
        func key(for file: String) -> String {
            file == intercept.caCertificateFile ? "tls.intercept.caCertificateFile" : "tls.intercept.caKeyFile"
        }
        func problem(_ file: String, _ text: String) -> ServiceSetupError {
            configured
                ? ServiceSetupError("\(key(for: file)): \(text)", exitCode: 2)
                : ServiceSetupError("the Outbox CA: \(text); run outbox ca --force to replace it", exitCode: 1)
        }
        switch error {
        case .unreadable(let file, let reason):
            return problem(file, "cannot read \(file): \(reason)")
        case .noCertificate(let file):
            return problem(file, "\(file) holds no PEM certificate")
        case .noKey(let file):
            return problem(file, "\(file) holds no unencrypted PEM private key")
        case .keyMismatch(let certificateFile, let keyFile):
            return problem(keyFile, "\(keyFile) is not the key of \(certificateFile)")
        case .notCA(let file):
            return problem(file, "\(file) is not a CA certificate (basicConstraints CA:TRUE)")
        case .expired(let file, let notAfter):
            return problem(file, "\(file) expired at \(notAfter)")
        case .outsideConstraints(let host, let file):
            let owner = configured ? "tls.intercept.caCertificateFile \(file)"
                : "the Outbox CA \(file); run outbox ca --force with this config to replace the CA"
            return ServiceSetupError("tls.intercept.hosts: \(host) is outside the name constraints of \(owner)", exitCode: 2)
        case .noHosts:
            return ServiceSetupError("tls.intercept.hosts: empty; the Outbox CA is created for the hosts to intercept, "
                                     + "so list them first", exitCode: 2)
        case .cannotWrite(let path, let reason):
            return ServiceSetupError("cannot write the Outbox CA: \(path): \(reason)", exitCode: 1)
        case .cannotCreate(let reason):
            return ServiceSetupError("cannot create the Outbox CA: \(reason)", exitCode: 1)
        }
    }
}
