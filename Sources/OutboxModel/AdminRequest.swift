import OutboxHTTP

/// One admin request, parsed: method, path below the prefix, query, body. Built by the proxy
/// path, served by the admin API; it lives below both so neither imports the other.
package struct AdminRequest: Sendable {
    package var method: String
    package var path: String
    package var query: [String: String]
    package var body: [UInt8]
    /// Render the answer pretty (`rendersPretty`: `?pretty`, or curl).
    package var pretty: Bool

    package init(method: String, path: String, query: [String: String], body: [UInt8], pretty: Bool) {
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.pretty = pretty
    }

    /// `/operations?status=failed&limit=2` → path and decoded query parameters.
    package static func split(_ subpath: String) -> (String, [String: String]) {
        guard let mark = subpath.firstIndex(of: "?") else { return (subpath, [:]) }
        var query: [String: String] = [:]
        for pair in subpath[subpath.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).removingPercentEncodingOrSelf
            query[key] = parts.count > 1 ? String(parts[1]).replacingPlus.removingPercentEncodingOrSelf : ""
        }
        return (String(subpath[..<mark]), query)
    }

    /// Whether the answer to an admin request, its refusal included, is pretty JSON: for
    /// `?pretty`, and for curl (`User-Agent: curl/…`), which people read in a terminal;
    /// scripts and browsers get it compact.
    package static func rendersPretty(_ head: HTTPRequestHead, query: [String: String]) -> Bool {
        query["pretty"] != nil || (head.headers.first("User-Agent")?.hasPrefix("curl/") ?? false)
    }
}

private extension String {
    var replacingPlus: String { String(map { $0 == "+" ? " " : $0 }) }
    var removingPercentEncodingOrSelf: String {
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
               let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
