/// The field-line rule shared by header and trailer sections (RFC 9112 §5):
/// `field-name ":" OWS field-value OWS`.
enum HTTPFieldLine {
    /// Validates one field line (without its line end) and appends it to `headers`, value
    /// trimmed of OWS.
    static func parse(_ line: UnsafeBufferPointer<UInt8>, into headers: inout HTTPHeaders) throws(HTTPParseError) {
        guard let first = line.first else { throw .malformedHeader }
        if HTTPByte.isWhitespace(first) {
            // RFC 9112 §5.2: obs-fold is deprecated; a server MUST reject it (400) unless inside
            // message/http. Whitespace before the first field is rejected too (RFC 9112 §2.2).
            throw headers.isEmpty ? .malformedHeader : .obsFold
        }
        var index = 0
        while index < line.count && HTTPByte.isTokenChar(line[index]) { index += 1 }
        // RFC 9110 §5.1: field-name = token. RFC 9112 §5.1: no whitespace is allowed between the
        // name and the colon; a server MUST reject such a line with 400 (a smuggling vector).
        guard index > 0, index < line.count, line[index] == HTTPByte.colon else { throw .malformedHeader }
        let nameEnd = index
        index += 1
        // RFC 9112 §5.1: OWS before and after the value is not part of it.
        var valueEnd = line.count
        while index < valueEnd && HTTPByte.isWhitespace(line[index]) { index += 1 }
        while valueEnd > index && HTTPByte.isWhitespace(line[valueEnd - 1]) { valueEnd -= 1 }
        // RFC 9110 §5.5: field-vchar, SP, HTAB and obs-text only; CR, LF and NUL MUST be
        // rejected (or replaced, which would make us disagree with the peer), other CTLs too.
        guard HTTPByte.isValidFieldValue(UnsafeBufferPointer(rebasing: line[index..<valueEnd])) else { throw .malformedHeader }
        if index == nameEnd + 2 && line[nameEnd + 1] == HTTPByte.space && valueEnd == line.count {
            headers.appendValidated(canonicalLine: line, nameLength: nameEnd)
        } else {
            headers.appendValidated(name: UnsafeBufferPointer(rebasing: line[0..<nameEnd]),
                                    value: UnsafeBufferPointer(rebasing: line[index..<valueEnd]))
        }
    }
}
