/// How a body goes into a JSON document of the admin API (SPEC §5): as `body`, its text, when
/// the bytes are valid UTF-8; else as `bodyBase64`. Found by one pass over the bytes, which may
/// come in pieces (``Scan``), so a body read from the log piece by piece is never held whole.
package enum BodyJSONForm: Sendable, Equatable {
    /// Valid UTF-8: the text, escaped as a JSON string's contents, `escapedCount` bytes long.
    case text(escapedCount: Int)
    /// Anything else: base64.
    case base64

    /// The member's name: `body` or `bodyBase64`.
    package var key: String {
        switch self {
        case .text: "body"
        case .base64: "bodyBase64"
        }
    }

    /// The length of the string's contents (quotes not included) for a body of `byteCount` bytes.
    package func encodedCount(byteCount: Int) -> Int {
        switch self {
        case .text(let escapedCount): escapedCount
        case .base64: Base64.encodedCount(byteCount)
        }
    }

    /// The form of bytes in memory.
    package init(of bytes: [UInt8]) {
        var scan = Scan()
        bytes.withUnsafeBytes { scan.add($0) }
        self = scan.form
    }

    /// The pass that finds the form: feed it every byte in order, in pieces cut anywhere.
    package struct Scan: Sendable {
        private var validation = UTF8Validation()
        private var escapedCount = 0

        package init() {}

        package mutating func add(_ bytes: UnsafeRawBufferPointer) {
            validation.add(bytes)
            // Only text is escaped; once the bytes are known not to be, counting is wasted.
            if validation.isValidSoFar { escapedCount += JSON.escapedCount(bytes) }
        }

        package var form: BodyJSONForm {
            validation.isValid ? .text(escapedCount: escapedCount) : .base64
        }
    }
}
