@testable import OutboxHTTP
import Testing

/// One message as a test sees it: the head, the concatenated body, the trailers, and whether
/// `.end` arrived. Events are collapsed so that any split of the input must give equal values.
struct ParsedMessage: Equatable, Sendable, CustomStringConvertible {
    var startLine: String
    var headers: [String]
    var framing: HTTPBodyFraming
    var body: [UInt8] = []
    var trailers: [String] = []
    var complete = false

    var description: String {
        "\(startLine) \(headers) \(framing) body=\(String(decoding: body, as: UTF8.self).debugDescription)"
            + " trailers=\(trailers)\(complete ? "" : " (no end)")"
    }
}

/// What parsing a whole input produced.
enum ParseOutcome: Equatable, Sendable, CustomStringConvertible {
    /// Every message seen, and, when the parser became a tunnel, the bytes it left unconsumed.
    case messages([ParsedMessage], tunnel: [UInt8]? = nil)
    /// The parser threw.
    case failure(HTTPParseError)

    var description: String {
        switch self {
        case .messages(let messages, let tunnel):
            let tunnelText = tunnel.map { " tunnel=\(String(decoding: $0, as: UTF8.self).debugDescription)" } ?? ""
            return "messages\(messages)\(tunnelText)"
        case .failure(let error):
            return "failure(\(error))"
        }
    }
}

/// A parser event reduced to what the harness compares.
enum CollapsedEvent {
    case head(startLine: String, headers: [String], framing: HTTPBodyFraming)
    case body(Range<Int>)
    case end(trailers: [String])
}

/// The two parsers behind one interface, so the same table driver runs both.
protocol CollapsibleParser {
    mutating func nextCollapsed(in buffer: [UInt8], index: inout Int) throws(HTTPParseError) -> CollapsedEvent?
    mutating func finishCollapsed() throws(HTTPParseError) -> CollapsedEvent?
    var isUpgraded: Bool { get }
}

func lines(_ headers: HTTPHeaders) -> [String] {
    headers.map { "\($0.name): \($0.value)" }
}

extension HTTPRequestParser: CollapsibleParser {
    mutating func nextCollapsed(in buffer: [UInt8], index: inout Int) throws(HTTPParseError) -> CollapsedEvent? {
        switch try next(in: buffer, index: &index) {
        case nil: return nil
        case .head(let head, let framing):
            return .head(startLine: "\(head.method) \(head.target) \(head.version)", headers: lines(head.headers), framing: framing)
        case .body(let range): return .body(range)
        case .end(let trailers): return .end(trailers: lines(trailers))
        }
    }

    mutating func finishCollapsed() throws(HTTPParseError) -> CollapsedEvent? {
        try finish()
        return nil
    }
}

extension HTTPResponseParser: CollapsibleParser {
    mutating func nextCollapsed(in buffer: [UInt8], index: inout Int) throws(HTTPParseError) -> CollapsedEvent? {
        collapse(try next(in: buffer, index: &index))
    }

    mutating func finishCollapsed() throws(HTTPParseError) -> CollapsedEvent? {
        collapse(try finish())
    }

    private func collapse(_ event: Event?) -> CollapsedEvent? {
        switch event {
        case nil: return nil
        case .head(let head, let framing):
            return .head(startLine: "\(head.version) \(head.status) \(head.reason)", headers: lines(head.headers), framing: framing)
        case .body(let range): return .body(range)
        case .end(let trailers): return .end(trailers: lines(trailers))
        }
    }
}

/// Feeds `input` to `parser` in pieces cut at `cuts` (ascending offsets), calling `next` until it
/// returns nil after each piece, then `finish`. With `compact`, unconsumed bytes are moved to
/// a fresh buffer between pieces, as a server that reuses its read buffer would.
/// Also checks the event contract: body ranges are non-empty and are the last bytes consumed.
func drive<P: CollapsibleParser>(_ parser: P, _ input: [UInt8], cuts: [Int], compact: Bool) -> ParseOutcome {
    var parser = parser
    var messages: [ParsedMessage] = []
    var buffer: [UInt8] = []
    var index = 0
    var bounds = cuts + [input.count]
    var start = 0

    func record(_ event: CollapsedEvent, _ buffer: [UInt8], from: Int, to: Int) {
        switch event {
        case .head(let startLine, let headers, let framing):
            if let last = messages.last {
                #expect(last.complete || parser.isUpgraded, "a head before the previous message ended")
            }
            messages.append(ParsedMessage(startLine: startLine, headers: headers, framing: framing))
        case .body(let range):
            // Chunk framing before the data may be consumed by the same call.
            #expect(!range.isEmpty && range.lowerBound >= from && range.upperBound == to,
                    "body range \(range) must be non-empty and end the consumed bytes \(from)..<\(to)")
            messages[messages.count - 1].body.append(contentsOf: buffer[range])
        case .end(let trailers):
            messages[messages.count - 1].trailers = trailers
            messages[messages.count - 1].complete = true
        }
    }

    do {
        while !bounds.isEmpty {
            let end = bounds.removeFirst()
            buffer.append(contentsOf: input[start..<end])
            start = end
            // Each call either returns an event, consumes a line, or returns nil: bounded.
            var calls = 0
            while calls <= input.count + 10 {
                calls += 1
                let before = index
                guard let event = try parser.nextCollapsed(in: buffer, index: &index) else { break }
                record(event, buffer, from: before, to: index)
            }
            #expect(calls <= input.count + 10, "the parser kept returning events without input")
            if compact {
                buffer = Array(buffer[index...])
                index = 0
            }
        }
        if parser.isUpgraded {
            var probe = index
            let afterUpgrade = try parser.nextCollapsed(in: buffer, index: &probe)
            #expect(afterUpgrade == nil && probe == index, "an upgraded parser must return nil and consume nothing")
            return .messages(messages, tunnel: Array(buffer[index...]))
        }
        if let event = try parser.finishCollapsed() {
            record(event, buffer, from: index, to: index)
        }
        return .messages(messages)
    } catch {
        return .failure(error)
    }
}

extension CollapsedEvent: Equatable {}

/// Runs every feeding of `input` a socket could deliver: whole, split in two at every byte
/// boundary, and one byte at a time (with and without moving unconsumed bytes).
func outcomesOfEveryFeeding<P: CollapsibleParser>(_ makeParser: () -> P, _ input: [UInt8]) -> [(String, ParseOutcome)] {
    var results: [(String, ParseOutcome)] = [("whole", drive(makeParser(), input, cuts: [], compact: false))]
    if input.count > 1 {
        for cut in 1..<input.count {
            results.append(("split at \(cut)", drive(makeParser(), input, cuts: [cut], compact: cut % 2 == 0)))
        }
        let everyByte = Array(1..<input.count)
        results.append(("byte by byte, compacting", drive(makeParser(), input, cuts: everyByte, compact: true)))
        results.append(("byte by byte, growing", drive(makeParser(), input, cuts: everyByte, compact: false)))
    }
    return results
}
