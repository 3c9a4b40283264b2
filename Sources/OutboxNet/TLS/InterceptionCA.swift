import COpenSSL
import CTLSShim
import Glibc
import OutboxModel

/// The CA that signs the certificates Outbox shows to clients whose `CONNECT` tunnels it
/// terminates: either one the configuration names (certificate and key PEM files), or the one
/// Outbox creates and keeps in its data directory's `ca/` (`outbox-ca.pem` 0644,
/// `outbox-ca-key.pem` 0600, the directory 0700).
///
/// A created CA is EC P-256, valid two years (from an hour ago, for clock skew), named
/// `Outbox interception CA (<hostname>)`, with basicConstraints critical CA:TRUE pathlen:0,
/// keyUsage critical keyCertSign and cRLSign, extendedKeyUsage serverAuth and a
/// subjectKeyIdentifier. When the intercept patterns allow it (`NameConstraints`) it carries a
/// critical nameConstraints extension, so that its key, stored on disk, can vouch for those
/// hosts and nothing else. Its certificate file is written last: it marks a complete CA, and
/// a key without it is a creation that did not finish.
///
/// It holds an `X509 *` and an `EVP_PKEY *` that are never changed after `init`; OpenSSL
/// allows threads to sign with one key and read one certificate at the same time, hence
/// `@unchecked Sendable`. The key is never logged, printed or served.
package final class InterceptionCA: @unchecked Sendable {
    package static let certificateFileName = "outbox-ca.pem"
    package static let keyFileName = "outbox-ca-key.pem"
    static let lifetimeSeconds = 730 * 86_400
    /// How far in the past validity starts, so a client whose clock is a little behind still accepts.
    static let clockSkewSeconds = 3600

    let certificate: OpaquePointer
    let key: OpaquePointer
    /// The certificate as PEM text (what `outbox ca` prints; for a created CA, the file's bytes).
    package let certificatePEM: [UInt8]
    /// Lowercase hex SHA-256 of the certificate's DER encoding.
    package let sha256Fingerprint: String
    /// The certificate's nameConstraints; nil when it has none (it may vouch for any name).
    package let constraints: NameConstraints?
    /// Where the certificate came from, for messages.
    package let certificateFile: String

    private init(certificate: OpaquePointer, key: OpaquePointer, file: String, pem: [UInt8], fingerprint: String) {
        self.certificate = certificate
        self.key = key
        certificateFile = file
        certificatePEM = pem
        sha256Fingerprint = fingerprint
        constraints = Self.readConstraints(certificate)
    }

    /// Takes ownership of both pointers: they belong to the CA returned, or are freed.
    private static func make(certificate: OpaquePointer, key: OpaquePointer, file: String) throws(InterceptionCAError) -> InterceptionCA {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard let pem = PEM.encode(certificate: certificate), X509_digest(certificate, EVP_sha256(), &digest, &length) == 1 else {
            ERR_clear_error()
            X509_free(certificate)
            EVP_PKEY_free(key)
            throw .noCertificate(file: file)
        }
        return InterceptionCA(certificate: certificate, key: key, file: file, pem: pem,
                              fingerprint: SHA256.hexText(Array(digest.prefix(Int(length)))))
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }

    /// The CA of `tls.intercept.caCertificateFile` and `caKeyFile`: a CA certificate and its
    /// unencrypted key, still valid, whose constraints (if any) cover every pattern in `hosts`.
    package static func load(certificateFile: String, keyFile: String, hosts: [String]) throws(InterceptionCAError) -> InterceptionCA {
        let authority = try read(certificateFile: certificateFile, keyFile: keyFile)
        try authority.checkCovers(hosts)
        return authority
    }

    /// The CA Outbox keeps in `directory` (created 0700 if missing): loaded when it exists and
    /// covers every pattern in `hosts`, created for `hosts` when it does not (or when
    /// `replacing`: a new key and certificate, the old ones gone). Creating needs at least one
    /// host, since the patterns decide what the CA may vouch for.
    package static func prepare(in directory: String, hosts: [String], replacing: Bool = false,
                                commonName: String = defaultCommonName) throws(InterceptionCAError) -> InterceptionCA {
        let locked = try LockedDirectory(directory)
        let certificateFile = directory + "/" + certificateFileName
        if !replacing, try readFile(certificateFile, missingIsNil: true) != nil {
            let authority = try read(certificateFile: certificateFile, keyFile: directory + "/" + keyFileName)
            try authority.checkCovers(hosts)
            return authority
        }
        guard !hosts.isEmpty else { throw .noHosts }
        // Made in memory first: a failure here leaves the old CA untouched.
        let authority = try create(commonName: commonName, constraints: NameConstraints(interceptPatterns: hosts),
                                   file: certificateFile)
        guard let keyPEM = PEM.encode(privateKey: authority.key) else { throw .cannotCreate(reason: "cannot encode the key") }
        // Certificate gone first, written last: a crash in between leaves no certificate (so
        // the next start creates a CA again), never a certificate paired with a foreign key.
        try removeDurably(named: certificateFileName, in: locked)
        try writeDurably(keyPEM, named: keyFileName, in: locked, mode: 0o600)
        try writeDurably(authority.certificatePEM, named: certificateFileName, in: locked, mode: 0o644)
        return authority
    }

    /// `Outbox interception CA (<hostname>)`: which machine's Outbox a user trusted shows in
    /// their certificate manager.
    package static var defaultCommonName: String {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count - 1) == 0
            ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown host"
        return "Outbox interception CA (\(host.isEmpty ? "unknown host" : host))"
    }

    /// Seconds until the certificate's validity ends (0 once it has): no leaf outlives it.
    var secondsLeft: Int {
        var days: Int32 = 0
        var seconds: Int32 = 0
        guard ASN1_TIME_diff(&days, &seconds, nil, X509_get0_notAfter(certificate)) == 1 else { return 0 }
        return max(0, Int(days) * 86_400 + Int(seconds))
    }

    /// Throws for the first pattern in `hosts` a leaf could not be trusted for.
    func checkCovers(_ hosts: [String]) throws(InterceptionCAError) {
        guard let constraints else { return }
        if let outside = hosts.first(where: { !constraints.permits(pattern: $0) }) {
            throw .outsideConstraints(host: outside, certificateFile: certificateFile)
        }
    }

    private static func read(certificateFile: String, keyFile: String) throws(InterceptionCAError) -> InterceptionCA {
        let certificateBytes = try readFile(certificateFile) ?? []
        let keyBytes = try readFile(keyFile) ?? []
        guard let certificate = PEM.certificate(certificateBytes) else { throw .noCertificate(file: certificateFile) }
        guard let key = PEM.privateKey(keyBytes) else {
            X509_free(certificate)
            throw .noKey(file: keyFile)
        }
        let authority = try make(certificate: certificate, key: key, file: certificateFile)
        guard X509_check_private_key(certificate, key) == 1 else {
            ERR_clear_error()
            throw .keyMismatch(certificateFile: certificateFile, keyFile: keyFile)
        }
        guard X509_check_ca(certificate) >= 1 else { throw .notCA(file: certificateFile) }
        if X509_cmp_current_time(X509_get0_notAfter(certificate)) < 0 {
            throw .expired(file: certificateFile, notAfter: iso8601(X509_get0_notAfter(certificate)))
        }
        return authority
    }

    private static func create(commonName: String, constraints: NameConstraints?, file: String) throws(InterceptionCAError) -> InterceptionCA {
        ERR_clear_error()
        guard let key = ctlsshim_ec_p256_key() else { throw .cannotCreate(reason: TLSError.fromErrorQueue("cannot make a key").reason) }
        var extensionValue: UnsafeMutablePointer<NAME_CONSTRAINTS>?
        if let constraints {
            guard let built = build(constraints) else {
                EVP_PKEY_free(key)
                throw .cannotCreate(reason: TLSError.fromErrorQueue("cannot build the name constraints").reason)
            }
            extensionValue = built
        }
        defer { if let extensionValue { NAME_CONSTRAINTS_free(extensionValue) } }
        guard let certificate = ctlsshim_ca_certificate(key, commonName, -clockSkewSeconds, lifetimeSeconds, extensionValue) else {
            EVP_PKEY_free(key)
            throw .cannotCreate(reason: TLSError.fromErrorQueue("cannot sign the CA certificate").reason)
        }
        return try make(certificate: certificate, key: key, file: file)
    }

    /// A `NAME_CONSTRAINTS *` holding `constraints`, or nil.
    private static func build(_ constraints: NameConstraints) -> UnsafeMutablePointer<NAME_CONSTRAINTS>? {
        guard let built = ctlsshim_name_constraints_new() else { return nil }
        var ok = true
        for (names, excluded) in [(constraints.permittedDNS, Int32(0)), (constraints.excludedDNS, 1)] {
            for name in names { ok = ok && ctlsshim_name_constraints_add_dns(built, excluded, name) == 1 }
        }
        for (subtrees, excluded) in [(constraints.permittedIP, Int32(0)), (constraints.excludedIP, 1)] {
            for subtree in subtrees { ok = ok && ctlsshim_name_constraints_add_ip(built, excluded, subtree, subtree.count) == 1 }
        }
        guard ok else {
            NAME_CONSTRAINTS_free(built)
            return nil
        }
        return built
    }

    /// The certificate's constraints as values. One that OpenSSL cannot read is taken as
    /// permitting nothing: whatever it says, it does not say what this code could check.
    private static func readConstraints(_ certificate: OpaquePointer) -> NameConstraints? {
        var present: Int32 = 0
        var critical: Int32 = 0
        let read = ctlsshim_certificate_name_constraints(certificate, &present, &critical)
        guard present == 1 else { return nil }
        guard let read else {
            ERR_clear_error()
            return NameConstraints(excludedDNS: [""], excludedIP: [[UInt8](repeating: 0, count: 8), [UInt8](repeating: 0, count: 32)])
        }
        defer { NAME_CONSTRAINTS_free(read) }
        var constraints = NameConstraints()
        for excluded in [Int32(0), 1] {
            for index in 0..<ctlsshim_name_constraints_count(read, excluded) {
                var data: UnsafePointer<UInt8>?
                var length: Int32 = 0
                let kind = ctlsshim_name_constraints_entry(read, excluded, index, &data, &length)
                guard let data, kind != 0 else { continue }
                let bytes = Array(UnsafeBufferPointer(start: data, count: Int(length)))
                switch (kind, excluded) {
                case (1, 0): constraints.permittedDNS.append(String(decoding: bytes, as: UTF8.self))
                case (1, _): constraints.excludedDNS.append(String(decoding: bytes, as: UTF8.self))
                case (_, 0): constraints.permittedIP.append(bytes)
                default: constraints.excludedIP.append(bytes)
                }
            }
        }
        return constraints
    }

    /// `2028-05-01T12:00:00Z`.
    private static func iso8601(_ time: UnsafePointer<ASN1_TIME>?) -> String {
        var parts = tm()
        guard let time, ASN1_TIME_to_tm(time, &parts) == 1 else { return "an unreadable date" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}
