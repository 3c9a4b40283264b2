import Foundation
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
import Testing

@Suite("Control headers: Outbox-Priority, -Tag, -Depends-On, -Mode, -Ordering-Key")
struct ControlHeadersTests {
    @Test("absent headers give the defaults")
    func defaults() throws {
        let parsed = try ControlHeaders(parsing: ["Host": "a", "Content-Type": "text/plain"])
        #expect(parsed == ControlHeaders(priority: .normal, tag: nil, dependsOn: nil, forceQueue: false))
    }

    @Test("valid values are parsed, names and keywords case-insensitively")
    func validValues() throws {
        let id = "0F8E4C1A-1111-4222-8333-444455556666"
        let parsed = try ControlHeaders(parsing: [
            "outbox-priority": "CRITICAL", "OUTBOX-TAG": "nightly import #3", "Outbox-Depends-On": id, "Outbox-Mode": "Queue",
        ])
        #expect(parsed.priority == .critical)
        #expect(parsed.tag == "nightly import #3")
        #expect(parsed.dependsOn == id)
        #expect(parsed.dependsOnOperationID == UUID(uuidString: id))
        #expect(parsed.forceQueue)
    }

    @Test("every priority keyword is accepted", arguments: OperationPriority.allCases)
    func priorities(priority: OperationPriority) throws {
        #expect(try ControlHeaders(parsing: ["Outbox-Priority": priority.name]).priority == priority)
    }

    @Test("an idempotency key is kept raw as the dependency")
    func dependsOnKey() throws {
        let parsed = try ControlHeaders(parsing: ["Outbox-Depends-On": "order-42"])
        #expect(parsed.dependsOn == "order-42")
        #expect(parsed.dependsOnOperationID == nil)
    }

    @Test("boundary lengths: 128-character tag and 255-character dependency are accepted")
    func boundaryLengths() throws {
        let parsed = try ControlHeaders(parsing: [
            "Outbox-Tag": String(repeating: "t", count: 128), "Outbox-Depends-On": String(repeating: "k", count: 255),
        ])
        #expect(parsed.tag?.count == 128)
        #expect(parsed.dependsOn?.count == 255)
    }

    @Test("invalid values are refused naming header and value", arguments: [
        ("Outbox-Priority", "urgent"), ("Outbox-Priority", ""), ("Outbox-Priority", "1"),
        ("Outbox-Tag", ""), ("Outbox-Tag", String(repeating: "t", count: 129)), ("Outbox-Tag", "caf\u{E9}"),
        ("Outbox-Tag", "a\tb"),
        ("Outbox-Depends-On", ""), ("Outbox-Depends-On", "a b"), ("Outbox-Depends-On", String(repeating: "k", count: 256)),
        ("Outbox-Mode", "forward"), ("Outbox-Mode", ""),
        ("Outbox-Ordering-Key", ""), ("Outbox-Ordering-Key", String(repeating: "k", count: 256)),
        ("Outbox-Ordering-Key", "a b"), ("Outbox-Ordering-Key", "caf\u{E9}"), ("Outbox-Ordering-Key", "a\tb"),
        ("Outbox-Ordering-Key", "a\u{7F}"),
    ])
    func invalidValues(name: String, value: String) {
        #expect(throws: ControlHeaderError.invalidValue(header: name, value: value)) {
            try ControlHeaders(parsing: HTTPHeaders([(name: name, value: value)]))
        }
        let error = ControlHeaderError.invalidValue(header: name, value: value)
        #expect(error.message.contains(name))
        #expect(error.message.contains("\"\(value)\""))
    }

    @Test("a header given twice is refused, even with equal values", arguments: [
        "Outbox-Priority", "Outbox-Tag", "Outbox-Depends-On", "Outbox-Mode",
    ])
    func repeatedHeader(name: String) {
        let value = name == "Outbox-Priority" ? "high" : "queue"
        #expect(throws: ControlHeaderError.repeated(header: name)) {
            try ControlHeaders(parsing: HTTPHeaders([(name: name, value: value), (name: name.uppercased(), value: value)]))
        }
    }

    @Test("an ordering key is 1–255 visible ASCII characters, kept exactly as sent")
    func orderingKey() throws {
        #expect(try ControlHeaders(parsing: ["Host": "a"]).orderingKey == nil)
        #expect(try ControlHeaders(parsing: ["outbox-ordering-key": "Customer-42/EU!~"]).orderingKey == "Customer-42/EU!~")
        #expect(try ControlHeaders(parsing: ["Outbox-Ordering-Key": "x"]).orderingKey == "x")
        let longest = String(repeating: "k", count: 255)
        #expect(try ControlHeaders(parsing: ["Outbox-Ordering-Key": longest]).orderingKey == longest)
    }

    @Test("an ordering key given twice with one value is that key; with two values it is refused")
    func orderingKeyRepeated() throws {
        let same = try ControlHeaders(parsing: HTTPHeaders([(name: "Outbox-Ordering-Key", value: "a"),
                                                            (name: "outbox-ordering-key", value: "a")]))
        #expect(same.orderingKey == "a")
        #expect(throws: ControlHeaderError.differingValues(header: "Outbox-Ordering-Key")) {
            try ControlHeaders(parsing: HTTPHeaders([(name: "Outbox-Ordering-Key", value: "a"),
                                                     (name: "Outbox-Ordering-Key", value: "A")]))
        }
        #expect(ControlHeaderError.differingValues(header: "Outbox-Ordering-Key").message
            == "Outbox-Ordering-Key header given more than once with different values")
    }

    @Test("the stripped names remove every control header and Outbox-Attempt, nothing else")
    func strippedNames() {
        var headers: HTTPHeaders = [
            "Host": "a", "Outbox-Priority": "high", "outbox-tag": "t", "Outbox-Depends-On": "k",
            "Outbox-Mode": "queue", "Outbox-Ordering-Key": "o", "Outbox-Attempt": "9", "Outbox-Other": "kept",
        ]
        headers.removeAll(lowercasedNames: ControlHeaders.strippedNames)
        #expect(headers == ["Host": "a", "Outbox-Other": "kept"])
    }
}
