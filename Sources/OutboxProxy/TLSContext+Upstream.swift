import Glibc
import OutboxConfig
import OutboxModel
import OutboxNet

extension TLSContext {
    /// The client context for `https://` origins from the `tls` settings: the system trust
    /// store plus `caFile`, no verification with `verify: false`, and the client certificate
    /// when one is set. The error names the key whose file OpenSSL refused.
    package static func upstream(_ settings: OutboxConfig.TLS) throws(TLSError) -> TLSContext {
        var certificate: (chainPEM: [UInt8], keyPEM: [UInt8])?
        if let certificateFile = settings.clientCertificateFile, let keyFile = settings.clientKeyFile {
            certificate = (try readPEM(certificateFile, key: "tls.clientCertificateFile"),
                           try readPEM(keyFile, key: "tls.clientKeyFile"))
        }
        do {
            return try TLSContext(clientVerifying: settings.verify, caFile: settings.caFile, certificate: certificate)
        } catch {
            // The engine's reasons name the file; the config key is added for the two that a
            // user's file causes (a system store that cannot load is no key's fault).
            let key = error.reason.hasPrefix("cannot load CA file") ? "tls.caFile: "
                : error.reason.hasPrefix("cannot use the certificate") ? "tls.clientCertificateFile: " : ""
            throw TLSError(key + error.reason)
        }
    }

    /// A PEM file's bytes; PEM files are small, 1 MiB bounds a mistaken path.
    private static func readPEM(_ path: String, key: String) throws(TLSError) -> [UInt8] {
        do {
            return try SmallFile.read(path, atMost: 1 << 20)
        } catch .system(let code) {
            throw TLSError("\(key): cannot read \(path): \(String(cString: strerror(code)))")
        } catch {
            throw TLSError("\(key): \(path) is larger than 1 MiB")
        }
    }
}
