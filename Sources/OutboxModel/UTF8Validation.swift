/// UTF-8 validity of bytes that arrive in pieces, cut anywhere (a sequence may straddle two
/// pieces): the rules `String(validating:as: UTF8.self)` applies (RFC 3629 §4: no overlong
/// forms, no surrogates, nothing above U+10FFFF), and nothing may be left cut at the end.
package struct UTF8Validation: Sendable {
    /// Continuation bytes the current sequence still needs.
    private var needed = 0
    /// The range its next continuation byte must be in: narrower after E0, ED, F0 and F4, which
    /// is how overlong forms, surrogates and values above U+10FFFF are refused.
    private var low: UInt8 = 0x80
    private var high: UInt8 = 0xBF
    private var failed = false

    package init() {}

    /// Whether everything added so far is valid UTF-8 and ends on a whole sequence.
    package var isValid: Bool { !failed && needed == 0 }

    /// Whether nothing added so far is invalid: a sequence may still be waiting for its end.
    package var isValidSoFar: Bool { !failed }

    /// Checks the next piece.
    package mutating func add(_ bytes: UnsafeRawBufferPointer) {
        guard !failed else { return }
        let count = bytes.count
        var index = 0
        while index < count {
            if needed == 0 {
                // ASCII runs, 8 bytes at a time: most bodies are mostly ASCII.
                while index + 8 <= count,
                      bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                    index += 8
                }
                guard index < count else { return }
                let byte = bytes[index]
                index += 1
                if byte < 0x80 { continue }
                switch byte {
                case 0xC2...0xDF: (needed, low, high) = (1, 0x80, 0xBF)
                case 0xE0: (needed, low, high) = (2, 0xA0, 0xBF)
                case 0xED: (needed, low, high) = (2, 0x80, 0x9F)
                case 0xE1...0xEF: (needed, low, high) = (2, 0x80, 0xBF)
                case 0xF0: (needed, low, high) = (3, 0x90, 0xBF)
                case 0xF1...0xF3: (needed, low, high) = (3, 0x80, 0xBF)
                case 0xF4: (needed, low, high) = (3, 0x80, 0x8F)
                default:
                    failed = true
                    return
                }
            } else {
                let byte = bytes[index]
                index += 1
                guard byte >= low && byte <= high else {
                    failed = true
                    return
                }
                needed -= 1
                (low, high) = (0x80, 0xBF)
            }
        }
    }
}
