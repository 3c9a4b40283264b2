/// How a message's body is delimited, decided from its head (RFC 9112 §6.3). This is where
/// request smuggling is stopped: every header that could make two parsers disagree about where
/// a message ends is rejected rather than interpreted.
package enum HTTPFramingRules {
    /// The transfer codings listed in all Transfer-Encoding fields (RFC 9112 §6.1).
    struct TransferCodings {
        var isPresent = false
        var chunkedCount = 0
        var otherCount = 0
        var finalIsChunked = false
    }

    /// What the framing decision needs from a head, gathered in one pass over its fields.
    package struct FramingFields {
        var hostCount = 0
        var hostIsValid = true
        var codings = TransferCodings()
        var codingsAreValid = true
        package var contentLength: Int?
        package var contentLengthIsValid = true
    }

    /// Framing of a request (RFC 9112 §6.1–6.3); also checks Host (RFC 9112 §3.2).
    static func requestFraming(_ head: HTTPRequestHead, limits: HTTPParserLimits) throws(HTTPParseError) -> HTTPBodyFraming {
        let fields = scan(head.headers)
        // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without a Host field,
        // and to any request with more than one Host field or an invalid Host value.
        if fields.hostCount > 1 || !fields.hostIsValid || (fields.hostCount == 0 && head.version != .http1_0) {
            throw .invalidHost
        }
        let codings = fields.codings
        if !fields.codingsAreValid { throw .malformedHeader }
        if !fields.contentLengthIsValid { throw .invalidContentLength }
        let length = fields.contentLength
        // RFC 9112 §6.1: a server MAY reject a request with both; as the front of the chain
        // we must, since a peer that prefers Content-Length would see a different message
        // boundary (the classic CL.TE / TE.CL smuggling).
        if codings.isPresent && length != nil { throw .conflictingFraming }
        // RFC 9110 §9.3.6: a CONNECT request has no content; what follows the head is tunnel
        // data, so a body announced by CONNECT is ambiguous and refused.
        if head.method == "CONNECT" {
            if codings.isPresent || (length ?? 0) != 0 { throw .conflictingFraming }
            return .none
        }
        if codings.isPresent {
            // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding MUST be treated as
            // having faulty framing.
            if head.version == .http1_0 { throw .malformedHeader }
            // RFC 9112 §7: a sender MUST NOT apply chunked more than once.
            if codings.chunkedCount > 1 { throw .malformedHeader }
            // RFC 9112 §6.1: a server that receives a transfer coding it does not understand
            // SHOULD answer 501; we understand only chunked. This also covers chunked not
            // being final (RFC 9112 §6.3 item 4), which could not be framed anyway.
            if codings.otherCount > 0 { throw .unsupportedTransferEncoding }
            return .chunked
        }
        if let length {
            if let maxBody = limits.maxBodyBytes, length > maxBody { throw .bodyTooLarge }
            return .contentLength(length)
        }
        // RFC 9112 §6.3 item 7: no Content-Length or Transfer-Encoding means no body.
        return .none
    }

    /// Framing of a response to a request of kind `requestMethod` (RFC 9112 §6.3).
    static func responseFraming(
        _ head: HTTPResponseHead, requestMethod: HTTPResponseParser.RequestKind, limits: HTTPParserLimits
    ) throws(HTTPParseError) -> HTTPBodyFraming {
        // RFC 9112 §6.3 item 1: responses to HEAD and 1xx/204/304 responses end at the blank
        // line whatever their fields say (a HEAD response's Content-Length describes the GET).
        if requestMethod == .head || head.status < 200 || head.status == 204 || head.status == 304 { return .none }
        // RFC 9112 §6.3 item 2: a 2xx to CONNECT switches to a tunnel right after the head.
        if requestMethod == .connect && head.status < 300 { return .none }
        let fields = scan(head.headers)
        let codings = fields.codings
        if !fields.codingsAreValid { throw .malformedHeader }
        if !fields.contentLengthIsValid { throw .invalidContentLength }
        let length = fields.contentLength
        // RFC 9112 §6.3 item 3: both present "ought to be handled as an error" (response
        // splitting); the proxy answers 502 rather than guess.
        if codings.isPresent && length != nil { throw .conflictingFraming }
        if codings.isPresent {
            if head.version == .http1_0 { throw .malformedHeader }   // RFC 9112 §6.1
            if codings.chunkedCount > 1 { throw .malformedHeader }   // RFC 9112 §7
            // RFC 9112 §6.3 item 4: chunked final → chunked; otherwise read until close.
            return codings.finalIsChunked ? .chunked : .untilClose
        }
        if let length {
            if let maxBody = limits.maxBodyBytes, length > maxBody { throw .bodyTooLarge }
            return .contentLength(length)
        }
        // RFC 9112 §6.3 item 8: otherwise the body runs until the server closes.
        return .untilClose
    }

    /// Reads Host, Transfer-Encoding and Content-Length in one pass over the fields, comparing
    /// names as bytes (no String is made).
    package static func scan(_ headers: HTTPHeaders) -> FramingFields {
        var result = FramingFields()
        headers.storage.withUnsafeBufferPointer { bytes in
            for field in headers.fields {
                let name = UnsafeBufferPointer(rebasing: bytes[field.nameRange])
                let value = UnsafeBufferPointer(rebasing: bytes[field.valueRange])
                switch field.nameLength {
                case 4 where equals(name, "host"):
                    result.hostCount += 1
                    if !isValidHost(value) { result.hostIsValid = false }
                case 14 where equals(name, "content-length"):
                    if !addContentLength(value, to: &result.contentLength) { result.contentLengthIsValid = false }
                case 17 where equals(name, "transfer-encoding"):
                    if !addTransferCodings(value, to: &result.codings) { result.codingsAreValid = false }
                default:
                    continue
                }
            }
        }
        return result
    }

    private static func equals(_ name: UnsafeBufferPointer<UInt8>, _ lowercased: StaticString) -> Bool {
        lowercased.withUTF8Buffer { HTTPByte.equalsIgnoringCase(name, $0) }
    }

    /// Adds the codings of one Transfer-Encoding field value; false when it is malformed:
    /// `Transfer-Encoding = #transfer-coding` (RFC 9112 §6.1) needs at least one coding, and a
    /// coding is `token *( OWS ";" OWS transfer-parameter )` (RFC 9110 §10.1.4).
    static func addTransferCodings(_ value: UnsafeBufferPointer<UInt8>, to codings: inout TransferCodings) -> Bool {
        codings.isPresent = true
        var elements = 0
        var valid = true
        HTTPByte.forEachListElement(value) { element in
            elements += 1
            var index = 0
            while index < element.count && HTTPByte.isTokenChar(element[index]) { index += 1 }
            var parameterStart = index
            while parameterStart < element.count && HTTPByte.isWhitespace(element[parameterStart]) { parameterStart += 1 }
            guard index > 0, parameterStart == element.count || element[parameterStart] == HTTPByte.semicolon else {
                valid = false
                return
            }
            let isChunked = index == element.count && equals(element, "chunked")
            if isChunked { codings.chunkedCount += 1 } else { codings.otherCount += 1 }
            codings.finalIsChunked = isChunked
        }
        return valid && elements > 0
    }

    /// Adds one Content-Length field value (RFC 9110 §8.6); false when it is not 1*DIGIT,
    /// overflows, or differs from a value seen before. A list of equal values is accepted as
    /// the RFC allows; anything else is refused, since peers that disagree about the length
    /// disagree about where the next message starts.
    static func addContentLength(_ value: UnsafeBufferPointer<UInt8>, to length: inout Int?) -> Bool {
        var elements = 0
        var valid = true
        HTTPByte.forEachListElement(value) { element in
            elements += 1
            var number = 0
            for byte in element {
                // Content-Length = 1*DIGIT: no sign, no hex, no inner space.
                guard HTTPByte.isDigit(byte) else { valid = false; return }
                let (times10, overflow1) = number.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int(byte &- 0x30))
                guard !overflow1, !overflow2 else { valid = false; return }
                number = sum
            }
            if let previous = length, previous != number { valid = false }
            length = number
        }
        // An empty value (or one of only commas) is not 1*DIGIT.
        return valid && elements > 0
    }

    /// `Host = uri-host [ ":" port ]` (RFC 9110 §7.2) with `uri-host = IP-literal / IPv4address
    /// / reg-name` (RFC 3986 §3.2.2). An empty value is valid (RFC 9112 §3.2, target without
    /// authority).
    static func isValidHost(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        if index < value.count && value[index] == UInt8(ascii: "[") {
            // IP-literal: IPv6 hex digits, colons and dots (embedded IPv4); IPvFuture is not
            // something a client of this proxy sends.
            index += 1
            let start = index
            while index < value.count, value[index] == HTTPByte.colon || value[index] == UInt8(ascii: ".")
                    || HTTPByte.hexValue(value[index]) != nil {
                index += 1
            }
            guard index > start, index < value.count, value[index] == UInt8(ascii: "]") else { return false }
            index += 1
        } else {
            // reg-name = *( unreserved / pct-encoded / sub-delims ); IPv4address is a subset.
            while index < value.count && value[index] != HTTPByte.colon {
                let byte = value[index]
                if byte == HTTPByte.percent {
                    guard index + 2 < value.count,
                          HTTPByte.hexValue(value[index + 1]) != nil, HTTPByte.hexValue(value[index + 2]) != nil
                    else { return false }
                    index += 3
                    continue
                }
                guard HTTPByte.isRegNameChar(byte) else { return false }
                index += 1
            }
        }
        guard index < value.count else { return true }
        guard value[index] == HTTPByte.colon else { return false }
        index += 1
        // port = *DIGIT (RFC 3986 §3.2.3), and a TCP port is at most 65535.
        var port = 0
        while index < value.count {
            guard HTTPByte.isDigit(value[index]) else { return false }
            port = port * 10 + Int(value[index] &- 0x30)
            if port > 65535 { return false }
            index += 1
        }
        return true
    }
}
