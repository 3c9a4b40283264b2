/// A JSON text whose long strings are written piece by piece, as the reader takes them: the
/// admin view of an operation, whose body may be megabytes (SPEC §6: at most 64 KiB of it
/// buffered per view). Its length is known before the first byte, so the answer is framed by
/// `Content-Length`.
///
/// The text is exactly what `JSON.rendered(pretty:)` gives for the same document, followed by
/// `trailer`: the document is rendered with a placeholder (``placeholder(_:)``) where each
/// streamed string goes, so the members around it, their order and layout come from the one
/// renderer; only the placeholders' contents are written from their ``ByteSource``s, escaped
/// text or base64 as their ``BodyJSONForm`` says.
package struct StreamedJSON: Sendable {
    /// A string value written from bytes kept elsewhere, in the form a first pass chose.
    package struct Text: Sendable {
        package var source: any ByteSource
        package var form: BodyJSONForm

        package init(source: any ByteSource, form: BodyJSONForm) {
            self.source = source
            self.form = form
        }
    }

    private enum Part: Sendable {
        case literal([UInt8])
        case text(Text)
    }

    private var parts: [Part]
    /// Bytes of the whole text.
    package let count: Int
    /// The part being written, and how far: bytes of a literal, source bytes of a text.
    private var part = 0
    private var offset = 0
    /// What a text's bytes are read into, made at the first read and kept.
    private var buffer: [UInt8] = []

    /// Source bytes read at a time for base64 (a multiple of 3, so the pieces' encodings join
    /// up): 64 KiB of output. Text is read in smaller pieces, since escaping can make one byte
    /// six (`\u0001`).
    static let base64Piece = 48 * 1024
    static let textPiece = 16 * 1024

    /// A string no document holds otherwise: its escaped form starts with `\u0000`, which no
    /// header, key or tag can hold (the HTTP parser refuses NUL), and a random number of this
    /// process follows.
    package static func placeholder(_ number: Int) -> String {
        "\u{0}streamed \(nonce) \(number)"
    }

    private static let nonce = UInt64.random(in: .min ... .max)

    /// `document` rendered, then `trailer`, with each string member whose value is a
    /// placeholder of `texts` replaced by that text. A placeholder that the document does not
    /// hold is ignored.
    package init(_ document: JSON, pretty: Bool, trailer: String = "", texts: [String: Text]) {
        let rendered = Array((document.rendered(pretty: pretty) + trailer).utf8)
        // Where each placeholder's contents sit, between its quotes.
        var holes: [(range: Range<Int>, text: Text)] = []
        for (placeholder, text) in texts {
            var quoted = Array(JSON.quoted(placeholder).utf8)
            quoted.removeFirst()
            quoted.removeLast()
            if let start = Self.firstIndex(of: quoted, in: rendered) {
                holes.append((start..<(start + quoted.count), text))
            }
        }
        holes.sort { $0.range.lowerBound < $1.range.lowerBound }
        var parts: [Part] = []
        var count = 0
        var from = 0
        for hole in holes {
            parts.append(.literal(Array(rendered[from..<hole.range.lowerBound])))
            parts.append(.text(hole.text))
            count += hole.range.lowerBound - from + hole.text.form.encodedCount(byteCount: hole.text.source.count)
            from = hole.range.upperBound
        }
        parts.append(.literal(Array(rendered[from...])))
        count += rendered.count - from
        self.parts = parts
        self.count = count
    }

    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard let first = needle.first, needle.count <= haystack.count else { return nil }
        var index = 0
        while index + needle.count <= haystack.count {
            if haystack[index] == first, haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// Whether every byte has been written.
    package var isComplete: Bool { part == parts.count }

    /// Appends the next bytes to `out`: at least `budget` of them unless the text ends first
    /// (one piece more at most). Returns whether more remains. A failed read throws; the text
    /// written so far is then all there will be.
    package mutating func write(into out: inout [UInt8], budget: Int) throws(ByteSourceError) -> Bool {
        let start = out.count
        while part < parts.count, out.count - start < budget {
            switch parts[part] {
            case .literal(let bytes):
                out.append(contentsOf: bytes[offset...])
                part += 1
                offset = 0
            case .text(let text):
                let total = text.source.count
                guard offset < total else {
                    part += 1
                    offset = 0
                    continue
                }
                let piece = min(total - offset, text.form == .base64 ? Self.base64Piece : Self.textPiece)
                if buffer.count < piece { buffer = [UInt8](repeating: 0, count: Self.base64Piece) }
                let from = offset
                let failure = buffer.withUnsafeMutableBytes { raw -> ByteSourceError? in
                    let slice = UnsafeMutableRawBufferPointer(rebasing: raw[..<piece])
                    do throws(ByteSourceError) {
                        try text.source.read(at: from, into: slice)
                    } catch {
                        return error
                    }
                    switch text.form {
                    case .base64: Base64.append(UnsafeRawBufferPointer(slice), to: &out)
                    case .text: JSON.appendEscaped(UnsafeRawBufferPointer(slice), to: &out)
                    }
                    return nil
                }
                if let failure { throw failure }
                offset += piece
            }
        }
        return part < parts.count
    }
}
