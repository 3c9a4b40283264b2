import Foundation
@testable import OutboxModel
import Testing

/// The product's SHA-256 (idempotency fingerprints, and the digest the integration harness
/// compares bodies by) against references it shares no code with: the FIPS 180-4 examples, and
/// coreutils' `sha256sum` on random buffers of the lengths where padding changes.
@Suite("SHA-256")
struct SHA256Tests {
    @Test func theFIPS180_4ExamplesHashToTheirPublishedDigests() {
        #expect(SHA256.hex(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var hasher = SHA256()
        let thousand = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { hasher.update(thousand) }
        #expect(hasher.finalizeHex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// 55 is the longest message whose padding fits its last block, 56 the shortest that needs
    /// another; 63, 64 and 65 straddle a block; 1 MiB + 1 ends one byte into a block.
    @Test(arguments: [0, 55, 56, 63, 64, 65, (1 << 20) + 1])
    func randomBuffersHashAsCoreutilsSha256sumHashesThem(length: Int) throws {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length + 8)
        while bytes.count < length { withUnsafeBytes(of: generator.next() as UInt64) { bytes.append(contentsOf: $0) } }
        bytes.removeLast(bytes.count - length)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-sha256-\(UUID().uuidString)")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let reference = try Self.sha256sum(file.path)

        #expect(SHA256.hex(of: bytes) == reference, "\(length) bytes")
        // Fed in uneven pieces (a socket's reads), the digest is the same.
        var hasher = SHA256()
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + Int.random(in: 1...5000, using: &generator))
            bytes[start..<end].withUnsafeBytes { hasher.update($0) }
            start = end
        }
        #expect(hasher.finalizeHex() == reference, "\(length) bytes in pieces")
    }

    /// Fingerprints are kept on disk and compared after a restart: the digest of
    /// method, NUL, target, NUL and body must never change with how it is fed.
    @Test func aFingerprintIsTheDigestOfMethodTargetAndBodyNULSeparated() {
        let body = Array("{\"amount\":1}".utf8) + [0, 0xFF]
        for (method, target) in [("POST", "/v1/pay?x=1"), ("PUT", ""), ("DELETE", "/caf\u{E9}")] {
            let whole = Array(method.utf8) + [0] + Array(target.utf8) + [0] + body
            let fingerprint = IdempotencyKey.fingerprint(method: method, target: target, body: body)
            #expect(SHA256.hexText(fingerprint) == SHA256.hex(of: whole), "\(method) \(target)")
        }
    }

    /// The digest `sha256sum` prints for the file at `path`.
    static func sha256sum(_ path: String) throws -> String {
        let (status, printed) = try ChildProcess.run("/usr/bin/sha256sum", [path], mergingErrors: false)
        guard status == 0, let digest = printed.split(separator: " ").first, digest.count == 64 else {
            throw StorageTestFailure("sha256sum \(path) failed (status \(status))")
        }
        return String(digest)
    }
}
