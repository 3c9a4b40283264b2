import Testing

/// Checks the error shape every proxy-made error shares: the status, a JSON
/// content type, and a `{"error":{"code":"…","message":"…"}}` body. Failures show the response
/// and the proxy's stderr.
func expectErrorResponse(_ response: HTTPResponse, status: Int, from outbox: OutboxProcess,
                         sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(response.status == status, "response:\n\(response)\n\(outbox)", sourceLocation: sourceLocation)
    #expect(response.headers["Content-Type"]?.lowercased().hasPrefix("application/json") == true,
            "Content-Type \(response.headers["Content-Type"] ?? "missing")\n\(outbox)", sourceLocation: sourceLocation)
    let envelope = response.errorEnvelope
    #expect(envelope != nil, "body is not {\"error\":{\"code\",\"message\"}}: \(response.bodyText)\n\(outbox)",
            sourceLocation: sourceLocation)
    #expect(envelope?.code.isEmpty == false, "empty error code\n\(outbox)", sourceLocation: sourceLocation)
}

/// The complete lines of `text`, each without its "\r"; the last piece, not ended by "\n"
/// yet, is left out. Split on scalars: "\r\n" is one Character in Swift.
func completeLines(_ text: String) -> [String] {
    text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { line in
        String(String.UnicodeScalarView(line.last == "\r" ? line.dropLast() : line))
    }
}

/// Lines of `text` that are not blank.
func nonEmptyLines(_ text: String) -> [String] {
    text.unicodeScalars.split(separator: "\n").map { String(String.UnicodeScalarView($0)) }
        .filter { !$0.trimmingCharacters(in: " \t\r").isEmpty }
}

/// Markers of a crash report or stack trace, which no CLI error may print.
func looksLikeStackTrace(_ text: String) -> Bool {
    ["Fatal error", "Stack dump", "Current stack trace", "backtrace", "💣", "SIGSEGV", "SIGILL", "Thread 0 crashed"]
        .contains { text.contains($0) }
}
