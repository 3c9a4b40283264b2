import OutboxConfig
import Testing

@Suite("SocketAddressSpec, UpstreamURL and allowed-host matching")
struct ConfigAddressTests {
    @Test("listen addresses parse into an unbracketed host and a port", arguments: [
        ("127.0.0.1:8080", "127.0.0.1", 8080),
        ("[::1]:8080", "::1", 8080),
        ("localhost:0", "localhost", 0),
        ("0.0.0.0:65535", "0.0.0.0", 65535),
        ("my_service.internal:80", "my_service.internal", 80),
    ])
    func socketAddressParses(text: String, host: String, port: Int) throws {
        let address = try #require(SocketAddressSpec.parse(text))
        #expect(address == SocketAddressSpec(host: host, port: port))
        #expect(address.description == text)
    }

    @Test("malformed listen addresses are rejected", arguments: [
        "localhost", "localhost:", ":8080", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:+80",
        "::1:8080", "[::1]8080", "[::1]", "[zz::1]:80", "999.1.1.1:80", "10.1:80", "a b:80",
        "host..name:80", "127.0.0.1:080080", "",
    ])
    func socketAddressRejects(text: String) {
        #expect(SocketAddressSpec.parse(text) == nil)
    }

    @Test("upstream URLs parse with default ports, lowercased host and a trimmed base path", arguments: [
        ("http://127.0.0.1:9000", UpstreamURL(scheme: .http, host: "127.0.0.1", port: 9000), "127.0.0.1:9000"),
        ("http://Example.COM", UpstreamURL(scheme: .http, host: "example.com", port: 80), "example.com"),
        ("HTTPS://example.com/", UpstreamURL(scheme: .https, host: "example.com", port: 443), "example.com"),
        ("https://example.com:8443/api/v1/", UpstreamURL(scheme: .https, host: "example.com", port: 8443, basePath: "/api/v1"), "example.com:8443"),
        ("http://[::1]:9000/x", UpstreamURL(scheme: .http, host: "::1", port: 9000, basePath: "/x"), "[::1]:9000"),
        ("https://[::1]:443", UpstreamURL(scheme: .https, host: "::1", port: 443), "[::1]"),
    ])
    func upstreamParses(text: String, expected: UpstreamURL, authority: String) throws {
        let url = try #require(UpstreamURL.parse(text))
        #expect(url == expected)
        #expect(url.authority == authority)
        #expect(UpstreamURL.parse(url.description) == url)
    }

    @Test("upstream URLs with another scheme, credentials, query, fragment or bad port are rejected", arguments: [
        "ftp://example.com", "example.com:80", "http://", "http://user:pw@example.com",
        "http://example.com/?q=1", "http://example.com/#top", "http://example.com:0",
        "http://example.com:65536", "http://example.com:", "http://exa mple.com", "http://example.com/a b",
        "http://::1:80/", "//example.com",
    ])
    func upstreamRejects(text: String) {
        #expect(UpstreamURL.parse(text) == nil)
    }

    @Test("allowedHosts: * matches all, *.suffix matches subdomains only, names match case-insensitively")
    func allowedHostMatching() {
        var proxy = OutboxConfig.ForwardProxy()
        proxy.allowedHosts = ["*.example.com", "api.local", "::1"]
        #expect(proxy.allowsHost("a.example.com"))
        #expect(proxy.allowsHost("A.B.Example.COM"))
        #expect(!proxy.allowsHost("example.com"))
        #expect(!proxy.allowsHost("badexample.com"))
        #expect(proxy.allowsHost("API.local"))
        #expect(proxy.allowsHost("api.local."))
        #expect(!proxy.allowsHost("x.api.local"))
        #expect(proxy.allowsHost("[::1]"))
        #expect(!proxy.allowsHost(""))
        proxy.allowedHosts = ["*"]
        #expect(proxy.allowsHost("anything.at.all"))
        proxy.allowedHosts = []
        #expect(!proxy.allowsHost("api.local"))
    }
}
