/// Reads the server name a TLS client asks for from the first bytes it sends (after `200` to
/// `CONNECT`), without consuming them: the caller keeps the bytes, picks the certificate for
/// the name, and then feeds the same bytes to a server `TLSEngine`.
///
/// Pure and stateless: call it with everything received so far (it re-reads from the start,
/// which is cheap at these sizes). It follows the handshake message across as many TLS
/// records and reads as the client used (RFC 8446 §5.1 lets a ClientHello span records), and
/// gives up past `limit` bytes: a real ClientHello is a few hundred bytes to 2 KiB.
package enum ClientHelloPeek {
    package enum Result: Equatable, Sendable {
        /// Everything so far is a valid start of a ClientHello: read more.
        case needMore
        /// Not a TLS ClientHello (plain HTTP, say, or a malformed one), or longer than `limit`.
        case notTLS
        /// A complete ClientHello. `serverName` is its SNI host_name (RFC 6066 §3), lowercased
        /// and without a trailing dot (an IP literal in `CertificateName`'s form); nil when it
        /// sent none (the caller then falls back to the `CONNECT` host).
        case clientHello(serverName: String?)
        /// A complete ClientHello whose SNI host_name is neither a host name nor an IP
        /// literal: it names no host a certificate could be made for.
        case invalidServerName
    }

    package static let limit = 16 * 1024

    static let handshakeRecord: UInt8 = 22
    static let clientHelloType: UInt8 = 1
    /// RFC 8446 §5.1: a record fragment is at most 2^14 bytes.
    static let maxFragment = 1 << 14

    /// What `bytes`, everything the client has sent so far, amount to.
    package static func inspect(_ bytes: [UInt8]) -> Result {
        bytes.withUnsafeBufferPointer { inspect($0) }
    }

    /// The same, over a buffer the caller holds (its read buffer, say).
    package static func inspect(_ bytes: UnsafeBufferPointer<UInt8>) -> Result {
        // Bytes past the limit are never looked at: a ClientHello must end before it.
        let result = scan(UnsafeBufferPointer(rebasing: bytes.prefix(limit)))
        return result == .needMore && bytes.count >= limit ? .notTLS : result
    }

    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Result {
        // The handshake bytes carried by the records so far, and the length of the message
        // once its 4-byte header has arrived.
        var message: [UInt8] = []
        var offset = 0
        while offset < bytes.count {
            // Each record header is checked byte by byte as it arrives, so that anything other
            // than TLS is refused at its first byte rather than after a 5-byte wait.
            guard bytes[offset] == handshakeRecord else { return .notTLS }
            guard offset + 1 < bytes.count else { return .needMore }
            guard bytes[offset + 1] == 3 else { return .notTLS }
            guard offset + 4 < bytes.count else { return .needMore }
            let fragmentLength = Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4])
            guard (1...maxFragment).contains(fragmentLength) else { return .notTLS }
            let start = offset + 5
            let end = min(bytes.count, start + fragmentLength)
            message += bytes[start..<end]
            if message.first.map({ $0 != clientHelloType }) ?? false { return .notTLS }
            if message.count >= 4 {
                let length = Int(message[1]) << 16 | Int(message[2]) << 8 | Int(message[3])
                guard 4 + length <= limit else { return .notTLS }
                if message.count >= 4 + length {
                    return clientHello(message[4..<(4 + length)])
                }
            }
            guard end == start + fragmentLength else { return .needMore }  // the record is still arriving
            offset = end
        }
        return .needMore
    }

    /// Parses a complete ClientHello body (RFC 8446 §4.1.2, the same layout as TLS 1.2's).
    static func clientHello(_ body: ArraySlice<UInt8>) -> Result {
        var reader = Reader(bytes: body)
        guard reader.skip(2 + 32),  // legacy_version, random
              reader.skipVector(lengthBytes: 1),  // legacy_session_id
              reader.skipVector(lengthBytes: 2),  // cipher_suites
              reader.skipVector(lengthBytes: 1)  // legacy_compression_methods
        else { return .notTLS }
        if reader.isAtEnd { return .clientHello(serverName: nil) }  // no extensions (TLS 1.2 allows it)
        guard var extensions = reader.vector(lengthBytes: 2), reader.isAtEnd else { return .notTLS }
        while !extensions.isAtEnd {
            guard let type = extensions.integer(bytes: 2), var data = extensions.vector(lengthBytes: 2) else { return .notTLS }
            guard type == 0 else { continue }  // server_name
            guard var names = data.vector(lengthBytes: 2), data.isAtEnd else { return .notTLS }
            while !names.isAtEnd {
                guard let nameType = names.integer(bytes: 1), let name = names.vector(lengthBytes: 2) else { return .notTLS }
                if nameType == 0 {  // host_name
                    guard let valid = CertificateName(String(decoding: name.rest, as: UTF8.self)) else { return .invalidServerName }
                    return .clientHello(serverName: valid.description)
                }
            }
            return .clientHello(serverName: nil)
        }
        return .clientHello(serverName: nil)
    }

    /// Big-endian fields and length-prefixed vectors over a slice; every read is bounds-checked.
    struct Reader {
        var bytes: ArraySlice<UInt8>

        var isAtEnd: Bool { bytes.isEmpty }
        var rest: ArraySlice<UInt8> { bytes }

        mutating func skip(_ count: Int) -> Bool {
            guard bytes.count >= count else { return false }
            bytes = bytes.dropFirst(count)
            return true
        }

        mutating func integer(bytes count: Int) -> Int? {
            guard bytes.count >= count else { return nil }
            let value = bytes.prefix(count).reduce(0) { $0 << 8 | Int($1) }
            bytes = bytes.dropFirst(count)
            return value
        }

        mutating func vector(lengthBytes: Int) -> Reader? {
            guard let length = integer(bytes: lengthBytes), bytes.count >= length else { return nil }
            let inner = bytes.prefix(length)
            bytes = bytes.dropFirst(length)
            return Reader(bytes: inner)
        }

        mutating func skipVector(lengthBytes: Int) -> Bool {
            vector(lengthBytes: lengthBytes) != nil
        }
    }
}
