import OutboxConfig
@testable import OutboxModel
import Testing

/// Every numeric config key against extreme values: the parser accepts a value in range or
/// refuses it with one line that starts with the key's path; nothing else (no crash, no error
/// that names no key). The keys are found by walking the effective config, so a key added
/// later is covered without touching this file.
@Suite("Config: extreme numbers are refused naming the key")
struct ConfigNumberTests {
    /// Values as JSON text. Only the first five can be valid anywhere (as 0, 1.5 or 2).
    static let mayBeValid = ["0", "-0", "1e-400", "1.5", "2"]
    static let neverValid = [
        "-1", "1e300", "-1e300", "NaN", "Infinity", "-Infinity", "1e999", "-1e999",
        "99999999999999999999", "-99999999999999999999", String(repeating: "9", count: 5000),
        "0x10", "1_000", "+1", ".5", #""5""#, #""""#, "\"" + String(repeating: "7", count: 5000) + "\"",
        "true", "false", "null", "[]", "{}",
    ]

    /// Key paths of every number in the effective config (`queue.maxBodyBytes`), and of every
    /// array of numbers as `path[0]` (`forwardProxy.connectPorts[0]`).
    static func numericKeys() throws -> [[String]] {
        let effective = try JSONReader.parse(Array(OutboxConfig().effectiveJSON().utf8))
        var keys: [[String]] = []
        func walk(_ value: JSON, _ path: [String]) {
            switch value {
            case .int, .double: keys.append(path)
            case .object(let members): for member in members { walk(member.value, path + [member.key]) }
            case .array(let items) where !items.isEmpty && items.allSatisfy({ $0.doubleValue != nil }):
                keys.append(path + ["[0]"])
            default: break
            }
        }
        walk(effective, [])
        return keys
    }

    /// `{"a": {"b": VALUE}}` for `["a", "b"]`; `["a", "[0]"]` puts VALUE in an array.
    static func document(_ path: [String], _ value: String) -> String {
        guard let last = path.last else { return value }
        let inner = last == "[0]" ? "[\(value)]" : value
        let keys = last == "[0]" ? path.dropLast() : path[...]
        return keys.reversed().reduce(inner) { "{\(JSON.quoted($1)): \($0)}" }
    }

    static func name(_ path: [String]) -> String {
        path.joined(separator: ".").replacingOccurrences(of: ".[0]", with: "[0]")
    }

    @Test func theWalkFindsTheNumericKeys() throws {
        let names = try Self.numericKeys().map(Self.name)
        for expected in ["queue.maxBodyBytes", "queue.ttlSeconds", "queue.unavailableStatuses[0]", "retry.multiplier",
                         "forwardProxy.connectPorts[0]", "limits.headerTimeoutSeconds", "replay.maxConcurrentPerOrigin"] {
            #expect(names.contains(expected), "\(names)")
        }
    }

    @Test func everyNumericKeyRefusesExtremeValuesByName() throws {
        var checked = 0
        for path in try Self.numericKeys() {
            let key = Self.name(path)
            for value in Self.mayBeValid + Self.neverValid {
                let message = configErrorMessage(Self.document(path, value))
                checked += 1
                if Self.neverValid.contains(value) {
                    #expect(message != nil, "\(key) accepted \(value.prefix(40))")
                }
                guard let message else { continue }
                #expect(message.hasPrefix("\(key): "), "\(key) = \(value.prefix(40)): \(message)")
                #expect(!message.contains("\n") && message.count < 300, "\(key) = \(value.prefix(40)): \(message.prefix(400))")
            }
            // The key itself given a number where the array belongs is refused by name too.
            if path.last == "[0]" {
                let arrayKey = Self.name(Array(path.dropLast()))
                let message = configErrorMessage(Self.document(Array(path.dropLast()), "443"))
                #expect(message?.hasPrefix("\(arrayKey): ") == true, "\(arrayKey) = 443: \(message ?? "accepted")")
            }
        }
        #expect(checked > 300, "only \(checked) combinations checked")
    }

    @Test("a value in range is read as written, -0 as 0")
    func valuesInRangeAreRead() throws {
        let config = try parseConfig(#"{"queue": {"ttlSeconds": -0.0, "completedRetentionSeconds": 1e-400}, "retry": {"maxRetries": -0}}"#)
        #expect(config.queue.ttlSeconds == 0 && config.queue.ttlSeconds.sign == .plus)
        #expect(config.queue.completedRetentionSeconds == 0)
        #expect(config.retry.maxRetries == 0)
    }
}
