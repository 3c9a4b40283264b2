extension Array where Element == UInt8 {
    /// Appends the UTF-8 of a literal, for the byte templates of answers and events: a
    /// `StaticString` is a pointer into the binary, so appending it costs a copy and no
    /// reference counting (a `static let` array costs a lazy-initialisation check, a retain
    /// and a release on every use).
    package mutating func append(literal text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: $0) }
    }
}
