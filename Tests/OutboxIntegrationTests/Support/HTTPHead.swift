/// The start line and header fields of an HTTP/1.1 message, parsed leniently by the harness's
/// own code (never the product's codec): the upstream must record whatever the proxy sends.
struct HTTPHead: Sendable {
    let startLine: String
    let headers: HTTPHeaders

    /// Parses a head ending in CRLFCRLF. Lines split on CRLF (a lone LF is accepted too);
    /// a line without a colon makes the head invalid.
    init(parsing bytes: [UInt8]) throws {
        // Split bytes, not Characters: Swift treats "\r\n" as one Character.
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            String(decoding: line.last == UInt8(ascii: "\r") ? line.dropLast() : line, as: UTF8.self)
        }
        while lines.last == "" { lines.removeLast() }
        guard let first = lines.first else { throw HarnessError("empty HTTP head") }
        startLine = first
        var fields: [HeaderField] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else {
                throw HarnessError("header line without a colon: \(line.debugDescription)")
            }
            fields.append(HeaderField(
                String(line[..<colon]),
                line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            ))
        }
        headers = HTTPHeaders(fields)
    }

    /// The start line split at single spaces, the reason phrase kept whole.
    var startLineParts: [String] {
        startLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
    }
}
