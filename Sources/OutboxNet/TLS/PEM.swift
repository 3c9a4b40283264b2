import COpenSSL
import CTLSShim

/// PEM text in and out of OpenSSL objects, through memory BIOs: no file is touched, so the
/// callers decide how files are read and written (crash-safe, with their modes).
enum PEM {
    /// The first certificate in `bytes` (an `X509 *` the caller frees), or nil.
    static func certificate(_ bytes: [UInt8]) -> OpaquePointer? {
        withReadBIO(bytes) { PEM_read_bio_X509($0, nil, nil, nil) }
    }

    /// The first private key in `bytes` (an `EVP_PKEY *` the caller frees), or nil. An
    /// encrypted key is refused rather than asked a passphrase for on the terminal.
    static func privateKey(_ bytes: [UInt8]) -> OpaquePointer? {
        withReadBIO(bytes) { PEM_read_bio_PrivateKey($0, nil, { _, _, _, _ in 0 }, nil) }
    }

    /// `-----BEGIN CERTIFICATE-----` text of `certificate`.
    static func encode(certificate: OpaquePointer) -> [UInt8]? {
        withWriteBIO { PEM_write_bio_X509($0, certificate) == 1 }
    }

    /// Unencrypted PKCS #8 (`-----BEGIN PRIVATE KEY-----`) text of `key`.
    static func encode(privateKey key: OpaquePointer) -> [UInt8]? {
        withWriteBIO { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) == 1 }
    }

    private static func withReadBIO(_ bytes: [UInt8], _ body: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
        bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(clamping: buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            let object = body(bio)
            ERR_clear_error()  // a failed read leaves its reason queued; the caller says what failed
            return object
        }
    }

    private static func withWriteBIO(_ body: (OpaquePointer) -> Bool) -> [UInt8]? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard body(bio) else {
            ERR_clear_error()
            return nil
        }
        let pending = ctlsshim_bio_pending(bio)
        return [UInt8](unsafeUninitializedCapacity: pending) { buffer, count in
            count = max(0, Int(BIO_read(bio, buffer.baseAddress, Int32(clamping: pending))))
        }
    }
}
