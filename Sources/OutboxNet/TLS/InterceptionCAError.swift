/// Why the interception CA cannot be used, as values: the service turns each into one line
/// naming the config key or file at fault, and an exit status.
package enum InterceptionCAError: Error, Equatable, Sendable {
    /// The file could not be opened or read (`reason` is the OS's).
    case unreadable(file: String, reason: String)
    /// The file holds no PEM certificate that OpenSSL can read.
    case noCertificate(file: String)
    /// The file holds no unencrypted PEM private key that OpenSSL can read.
    case noKey(file: String)
    /// The key does not belong to the certificate.
    case keyMismatch(certificateFile: String, keyFile: String)
    /// The certificate is not a CA certificate (basicConstraints CA:TRUE).
    case notCA(file: String)
    /// The certificate's validity has ended.
    case expired(file: String, notAfter: String)
    /// `host` is an intercept pattern the CA's nameConstraints do not cover.
    case outsideConstraints(host: String, certificateFile: String)
    /// A CA was to be created but no host to limit it to was given.
    case noHosts
    /// Creating the directory or writing a file failed (`reason` is the OS's).
    case cannotWrite(path: String, reason: String)
    /// OpenSSL failed to make a key or certificate.
    case cannotCreate(reason: String)
}
