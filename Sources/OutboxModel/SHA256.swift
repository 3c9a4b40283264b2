import COpenSSL

/// SHA-256 (FIPS 180-4) computed by the system's libcrypto: the fingerprint that tells "the
/// same request" for idempotency keys, and the digest the integration harness compares bodies
/// by (streamed, so 64 MiB bodies are never held). Its tests check it against the FIPS 180-4
/// examples and against coreutils' `sha256sum`.
///
/// A value: copying a hasher part-way and feeding both copies gives two independent digests
/// (the OpenSSL context is copied on the first write after a copy).
package struct SHA256: Sendable {
    /// One `EVP_MD_CTX`, owned by exactly one hasher at a time (copy on write), so sending a
    /// hasher to another thread hands the context over with it.
    private final class Context: @unchecked Sendable {
        let pointer: OpaquePointer

        init() {
            pointer = Self.newContext()
            Self.start(pointer)
        }

        init(copying other: Context) {
            pointer = Self.newContext()
            guard EVP_MD_CTX_copy_ex(pointer, other.pointer) == 1 else { Self.unusable("copy") }
        }

        deinit {
            EVP_MD_CTX_free(pointer)
        }

        static func start(_ pointer: OpaquePointer) {
            guard EVP_DigestInit_ex(pointer, Algorithm.sha256.pointer, nil) == 1 else { unusable("start") }
        }

        /// SHA-256 fetched from libcrypto's provider once: `EVP_sha256()` makes every
        /// `EVP_DigestInit_ex` fetch it again (a locked lookup), once per stored request.
        private struct Algorithm: @unchecked Sendable {
            let pointer: OpaquePointer
            static let sha256: Algorithm = {
                guard let fetched = EVP_MD_fetch(nil, "SHA256", nil) else { unusable("fetch") }
                return Algorithm(pointer: fetched)
            }()
        }

        private static func newContext() -> OpaquePointer {
            guard let pointer = EVP_MD_CTX_new() else { unusable("allocate") }
            return pointer
        }

        /// libcrypto fails these calls only when it cannot allocate a few hundred bytes or
        /// has no SHA-256 at all: nothing a caller could recover from.
        static func unusable(_ what: String) -> Never {
            fatalError("libcrypto cannot \(what) a SHA-256 context")
        }
    }

    private var context = Context()

    /// A fresh hash state.
    package init() {}

    /// The lowercase hex digest of `bytes`.
    package static func hex(of bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            _ = digest.withUnsafeMutableBufferPointer { COpenSSL.SHA256(input.baseAddress, input.count, $0.baseAddress) }
        }
        return hexText(digest)
    }

    /// Feeds more message bytes.
    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Feeds more message bytes straight from a buffer, so socket reads need no copy.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        if !isKnownUniquelyReferenced(&context) { context = Context(copying: context) }
        guard EVP_DigestUpdate(context.pointer, base, bytes.count) == 1 else {
            Context.unusable("update")
        }
    }

    /// Finishes and returns the 32-byte digest; the hasher starts afresh afterwards.
    package mutating func finalize() -> [UInt8] {
        if !isKnownUniquelyReferenced(&context) { context = Context(copying: context) }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context.pointer, &digest, &length) == 1 else {
            Context.unusable("finish")
        }
        Context.start(context.pointer)
        return Array(digest.prefix(Int(length)))
    }

    /// Finishes and returns the digest as lowercase hex.
    package mutating func finalizeHex() -> String {
        Self.hexText(finalize())
    }

    /// Lowercase hex of `bytes`, two digits each.
    package static func hexText(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] }, as: UTF8.self)
    }
}
