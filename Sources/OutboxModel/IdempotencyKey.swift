/// Idempotency keys and request fingerprints: a write repeated with the same key is one operation.
package enum IdempotencyKey {
    /// 1–255 visible ASCII characters: long enough for any UUID or hash, safe in logs and JSON.
    package static func isValid(_ key: String) -> Bool {
        (1...255).contains(key.utf8.count) && key.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// SHA-256 of method, target and body, NUL-separated: "the same request".
    package static func fingerprint(method: String, target: String, body: [UInt8]) -> [UInt8] {
        var hash = fingerprintHasher(method: method, target: target)
        hash.update(body)
        return hash.finalize()
    }

    /// The fingerprint's hash with method and target fed: the body follows piece by piece
    /// (one kept in a spill file is read in pieces), then `finalize()`.
    package static func fingerprintHasher(method: String, target: String) -> SHA256 {
        var hash = SHA256()
        // Fed piece by piece, with no array built for the prefix: the digest is the same.
        func field(_ text: String) {
            var text = text
            text.withUTF8 { hash.update(UnsafeRawBufferPointer($0)) }
            hash.update(separator)
        }
        field(method)
        field(target)
        return hash
    }

    /// `request`'s fingerprint: the stored one, or the digest of its method, target and body
    /// when it was stored without one (a key Outbox made up).
    package static func fingerprint(of request: OperationRequest) -> [UInt8] {
        request.fingerprint.isEmpty
            ? fingerprint(method: request.method, target: request.target, body: request.body)
            : request.fingerprint
    }

    private static let separator: [UInt8] = [0]
}
