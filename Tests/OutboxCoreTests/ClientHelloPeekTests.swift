import Foundation
@testable import OutboxNet
import Testing

/// The ClientHello peek on ClientHellos real clients sent (captured by
/// `Tests/Fixtures/tls/client-hello/capture.sh`), split at every byte, re-framed across
/// several records, and on what is not a ClientHello.
@Suite("ClientHello peek")
struct ClientHelloPeekTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/tls/client-hello")

    struct Captured: Sendable, CustomTestStringConvertible {
        let file: String
        let serverName: String?
        var testDescription: String { file }

        func bytes() throws -> [UInt8] {
            [UInt8](try Data(contentsOf: ClientHelloPeekTests.fixtures.appendingPathComponent(file)))
        }
    }

    static let captured = [
        Captured(file: "openssl.bin", serverName: "api.example.com"),  // openssl s_client -servername
        Captured(file: "openssl-nosni.bin", serverName: nil),  // openssl s_client -noservername
        Captured(file: "curl.bin", serverName: "shop.example.org"),
        Captured(file: "python.bin", serverName: "py.example.net"),  // sent as Py.Example.NET
        Captured(file: "node.bin", serverName: "node.example.com"),
    ]

    @Test(arguments: captured)
    func aCapturedClientHelloGivesItsServerNameWhateverTheReadsWere(_ hello: Captured) throws {
        let bytes = try hello.bytes()
        #expect(ClientHelloPeek.inspect(bytes) == .clientHello(serverName: hello.serverName))
        // Every shorter prefix is a start that needs more: this is how reads arrive.
        for end in 0..<bytes.count {
            let prefix = Array(bytes[..<end])
            #expect(ClientHelloPeek.inspect(prefix) == .needMore, "\(end) of \(bytes.count) bytes")
        }
        // Whatever follows the ClientHello (the client does not wait) does not matter.
        #expect(ClientHelloPeek.inspect(bytes + [0x14, 0x03, 0x03, 0x00, 0x01, 0x01]) == .clientHello(serverName: hello.serverName))
    }

    @Test(arguments: captured, [1, 7, 100])
    func aClientHelloSpreadOverSeveralRecordsIsReadWhole(_ hello: Captured, fragment: Int) throws {
        let records = Self.reframe(try hello.bytes(), fragment: fragment)
        #expect(ClientHelloPeek.inspect(records) == .clientHello(serverName: hello.serverName))
        for end in stride(from: 0, to: records.count, by: max(1, fragment / 3)) {
            #expect(ClientHelloPeek.inspect(Array(records[..<end])) == .needMore, "\(end) of \(records.count) bytes")
        }
    }

    @Test func theTLSEnginesOwnClientHelloCarriesItsSNIAndNoneForAnAddress() throws {
        let context = try TLSContext(clientVerifying: false)
        let named = try TLSEngine(clientOf: context, host: "Engine.Example.com")
        _ = named.handshake()
        #expect(ClientHelloPeek.inspect(named.drainOutput()) == .clientHello(serverName: "engine.example.com"))
        let address = try TLSEngine(clientOf: context, host: "127.0.0.1")
        _ = address.handshake()
        #expect(ClientHelloPeek.inspect(address.drainOutput()) == .clientHello(serverName: nil))
    }

    struct NotTLS: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        var testDescription: String { name }
    }

    @Test(arguments: [
        NotTLS(name: "plain HTTP", bytes: Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)),
        NotTLS(name: "an SSL 2 hello", bytes: [0x80, 0x2e, 0x01, 0x03, 0x01]),
        NotTLS(name: "an alert record", bytes: [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28]),
        NotTLS(name: "record version 2", bytes: [0x16, 0x02, 0x00, 0x00, 0x10]),
        NotTLS(name: "an empty record", bytes: [0x16, 0x03, 0x01, 0x00, 0x00]),
        NotTLS(name: "a record over 2^14", bytes: [0x16, 0x03, 0x01, 0x40, 0x01]),
        NotTLS(name: "a ServerHello", bytes: [0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00]),
        NotTLS(name: "a ClientHello declared over 16 KiB", bytes: [0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x40, 0x00]),
        // A complete ClientHello of 38 bytes whose session id claims more than it holds.
        NotTLS(name: "a truncated vector", bytes: [0x16, 0x03, 0x01, 0x00, 0x2a, 0x01, 0x00, 0x00, 0x26, 0x03, 0x03]
            + Array(repeating: 0, count: 32) + [0x20, 0x00, 0x00, 0x00]),
    ])
    func whatIsNotAClientHelloIsToldAtOnce(_ input: NotTLS) {
        #expect(ClientHelloPeek.inspect(input.bytes) == .notTLS)
    }

    @Test func aClientHelloThatHasNotEndedWithinTheLimitIsNotTLS() throws {
        // One-byte records make a small message cost six bytes each: it never ends in time.
        var bytes: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x0f, 0xff]
        while bytes.count < ClientHelloPeek.limit { bytes += [0x16, 0x03, 0x01, 0x00, 0x01, 0x00] }
        #expect(ClientHelloPeek.inspect(Array(bytes[..<(ClientHelloPeek.limit - 1)])) == .needMore)
        #expect(ClientHelloPeek.inspect(bytes) == .notTLS)
    }

    /// Told apart from no SNI at all: the proxy refuses such a hello (`unrecognized_name`)
    /// rather than presenting the `CONNECT` host's certificate to a client that asked for
    /// something else.
    @Test func anSNIThatIsNoHostNameIsToldApartFromNoSNI() throws {
        let hello = try Self.captured[0].bytes()
        // Replace "api.example.com" by "api example.com" in place: same lengths, invalid name.
        let name = Array("api.example.com".utf8)
        let start = try #require(hello.firstRange(of: name)).lowerBound
        var changed = hello
        changed[start + 3] = UInt8(ascii: " ")
        #expect(ClientHelloPeek.inspect(changed) == .invalidServerName)
    }

    /// The handshake message of a one-record ClientHello, cut into records of `fragment` bytes.
    static func reframe(_ record: [UInt8], fragment: Int) -> [UInt8] {
        let message = record[5...]
        var output: [UInt8] = []
        var start = message.startIndex
        while start < message.endIndex {
            let end = min(message.endIndex, start + fragment)
            output += [0x16, 0x03, 0x01, UInt8((end - start) >> 8), UInt8((end - start) & 0xff)] + message[start..<end]
            start = end
        }
        return output
    }
}
