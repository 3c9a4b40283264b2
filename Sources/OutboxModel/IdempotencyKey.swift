import OutboxHTTP

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

    /// The header fields that say who sent a request. A stored response is given back for a
    /// repeated key only to a request with the same values (SPEC §4), as Stripe scopes keys to
    /// an account: another user's retry must not read the first user's answer.
    package static let credentialHeaders = ["authorization", "cookie", "proxy-authorization"]

    /// SHA-256 of the credential fields' values (each name, in ``credentialHeaders`` order,
    /// with each of its values in order, NUL-separated); empty when there are none, so a request
    /// without credentials costs no digest.
    package static func credentials(in headers: HTTPHeaders) -> [UInt8] {
        var hash: SHA256?
        for var name in credentialHeaders {
            for var value in headers.values(name) {
                if hash == nil { hash = SHA256() }
                name.withUTF8 { hash?.update(UnsafeRawBufferPointer($0)) }
                hash?.update(separator)
                value.withUTF8 { hash?.update(UnsafeRawBufferPointer($0)) }
                hash?.update(separator)
            }
        }
        return hash?.finalize() ?? []
    }

    /// The credential digest `request` was stored with; a record written before the digest was
    /// kept has its stored headers looked at instead (they hold `Authorization` and `Cookie`;
    /// `Proxy-Authorization`, a hop-by-hop field, never reaches them).
    package static func credentials(of request: OperationRequest) -> [UInt8] {
        request.credentials.isEmpty ? credentials(in: request.headers) : request.credentials
    }

    private static let separator: [UInt8] = [0]
}
