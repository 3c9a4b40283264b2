import OutboxHTTP
import OutboxModel
import Synchronization

/// Decoding of the texts that come back in every row a lane takes ahead, done often enough
/// (once per delivered operation) that the general paths showed in a profile of the drain:
/// an origin parsed from its text, and a header list from `jsonb`'s text.
package enum PostgresRowText {
    /// The origins seen, by their text: a queue holds few origins, and each row names one.
    private static let origins = Mutex<[String: Origin]>([:])
    private static let maxOrigins = 256

    /// `text` (`scheme://host[:port]`, as the store writes origins) as an origin; nil when it
    /// is not one.
    package static func origin(_ text: String) -> Origin? {
        if let known = origins.withLock({ $0[text] }) { return known }
        guard let (origin, _) = Origin.parseAbsolute(text + "/") else { return nil }
        origins.withLock { cache in
            if cache.count >= maxOrigins { cache.removeAll(keepingCapacity: true) }
            cache[text] = origin
        }
        return origin
    }

    /// Headers from the text of a `jsonb` array of `[name, value]` pairs, as PostgreSQL prints
    /// it (`[["Host", "a"], ["X", "b"]]`). Strings without escapes are read here in one pass;
    /// anything else (an escape, another shape) goes to the general JSON reader.
    package static func headers(_ text: String) -> HTTPHeaders? {
        var text = text
        let fast = text.withUTF8 { bytes -> HTTPHeaders?? in
            var reader = Reader(bytes: bytes)
            return reader.pairs().map { Optional(HTTPHeaders($0)) }
        }
        if let fast { return fast }
        return PostgresOperations.headersReadAsJSON(text)
    }

    /// A one-pass reader of `[["name", "value"], …]` that gives up (nil) at anything else.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        mutating func pairs() -> [(name: String, value: String)]? {
            var fields: [(name: String, value: String)] = []
            guard take(UInt8(ascii: "[")) else { return nil }
            if take(UInt8(ascii: "]")) { return atEnd ? fields : nil }
            repeat {
                guard take(UInt8(ascii: "[")), let name = string(), take(UInt8(ascii: ",")), let value = string(),
                      take(UInt8(ascii: "]")) else { return nil }
                fields.append((name, value))
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]")) && atEnd ? fields : nil
        }

        private var atEnd: Bool {
            mutating get {
                skipSpaces()
                return index == bytes.count
            }
        }

        private mutating func skipSpaces() {
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\n") { index += 1 }
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            skipSpaces()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string without escapes or control characters; nil otherwise.
        private mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    defer { index += 1 }
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                index += 1
            }
            return nil
        }
    }
}
