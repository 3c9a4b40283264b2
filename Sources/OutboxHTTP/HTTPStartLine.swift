/// The request-line and status-line rules (RFC 9112 §3, §4). Each parses one line (without its
/// line end) and makes Strings only for the parts it returns.
enum HTTPStartLine {
    /// `method SP request-target SP HTTP-version` (RFC 9112 §3).
    static func parseRequestLine(_ line: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> (method: String, target: String, version: HTTPVersion) {
        var index = 0
        // RFC 9110 §9.1: method = token.
        while index < line.count && HTTPByte.isTokenChar(line[index]) { index += 1 }
        // RFC 9112 §3: exactly one SP between the parts; lenient parsing of other whitespace
        // is only a MAY, and being strict keeps us in step with the upstream's reading.
        guard index > 0, index < line.count, line[index] == HTTPByte.space else { throw .malformedStartLine }
        let methodEnd = index
        index += 1
        let targetStart = index
        // RFC 9112 §3.2: the target contains no whitespace; CTLs and bytes >= 0x80 are not
        // URI characters (RFC 3986 §2), so anything outside VCHAR is rejected.
        while index < line.count && line[index] > HTTPByte.space && line[index] < 0x7F { index += 1 }
        guard index > targetStart, index < line.count, line[index] == HTTPByte.space else { throw .malformedStartLine }
        let targetEnd = index
        index += 1
        let version = try parseVersion(UnsafeBufferPointer(rebasing: line[index...]))
        return (String(decoding: UnsafeBufferPointer(rebasing: line[0..<methodEnd]), as: UTF8.self),
                String(decoding: UnsafeBufferPointer(rebasing: line[targetStart..<targetEnd]), as: UTF8.self),
                version)
    }

    /// `HTTP-version SP status-code SP [ reason-phrase ]` (RFC 9112 §4); the SP before an empty
    /// reason may be missing, as some servers send `HTTP/1.1 200`.
    static func parseStatusLine(_ line: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> (version: HTTPVersion, status: Int, reason: String) {
        guard line.count >= 12, line[8] == HTTPByte.space else { throw .malformedStartLine }
        let version = try parseVersion(UnsafeBufferPointer(rebasing: line[0..<8]))
        // RFC 9110 §15: status-code = 3DIGIT, and all valid codes are 100...599.
        var status = 0
        for index in 9..<12 {
            guard HTTPByte.isDigit(line[index]) else { throw .malformedStartLine }
            status = status * 10 + Int(line[index] &- 0x30)
        }
        guard (100...599).contains(status) else { throw .malformedStartLine }
        guard line.count > 12 else { return (version, status, "") }
        guard line[12] == HTTPByte.space else { throw .malformedStartLine }
        // RFC 9112 §4: reason-phrase = 1*( HTAB / SP / VCHAR / obs-text ).
        var index = 13
        while index < line.count {
            guard HTTPByte.isFieldValueChar(line[index]) else { throw .malformedStartLine }
            index += 1
        }
        return (version, status, String(decoding: UnsafeBufferPointer(rebasing: line[13...]), as: UTF8.self))
    }

    /// `HTTP-version = "HTTP/" DIGIT "." DIGIT`, case-sensitive (RFC 9112 §2.3). A well-formed
    /// version other than 1.0 or 1.1 is `.unsupportedVersion` (505), anything else malformed.
    static func parseVersion(_ bytes: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> HTTPVersion {
        guard bytes.count == 8,
              bytes[0] == UInt8(ascii: "H"), bytes[1] == UInt8(ascii: "T"), bytes[2] == UInt8(ascii: "T"),
              bytes[3] == UInt8(ascii: "P"), bytes[4] == UInt8(ascii: "/"),
              HTTPByte.isDigit(bytes[5]), bytes[6] == UInt8(ascii: "."), HTTPByte.isDigit(bytes[7])
        else { throw .malformedStartLine }
        let version = HTTPVersion(major: Int(bytes[5] &- 0x30), minor: Int(bytes[7] &- 0x30))
        guard version == .http1_1 || version == .http1_0 else { throw .unsupportedVersion }
        return version
    }
}
