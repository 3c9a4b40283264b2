import Foundation
import Glibc
import Testing

/// `GET /admin/events`: the changes of operations, origins and connectivity as server-sent
/// events, through real sockets and the real binary.
@Suite("Admin events", .harnessThreads)
struct EventStreamTests {
    @Test func anOperationsLifeAndItsOriginArriveInOrder() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let events = try EventStreamClient(outbox)
        #expect(events.status == 200, "\(events.head)")
        #expect(events.head.lowercased().contains("content-type: text/event-stream"), "\(events.head)")

        let stored = try outbox.enqueue(body: "hello", headers: [HeaderField("Outbox-Ordering-Key", "user-7")])
        let offline = try events.next { $0.type == "origin" }
        #expect(try offline.json().bool("online") == false, "\(offline)")
        #expect(try offline.json().string("origin") == upstream.baseURL, "\(offline)")

        try upstream.restart()
        var statuses: [String] = []
        var online = false
        while statuses.last != "completed" {
            let event = try events.next()
            let data = try event.json()
            if event.type == "origin" { online = data.bool("online") == true }
            if event.type == "operation", data.string("id") == stored.id {
                statuses.append(data.string("status") ?? "?")
                #expect(data.string("orderingKey") == "user-7", "\(event)")
                #expect(data.string("origin") == upstream.baseURL, "\(event)")
            }
            #expect(event.id != nil, "\(event)")
        }
        #expect(statuses == ["pending", "inProgress", "completed"], "\(statuses)")
        #expect(online, "no event said the origin came back")

        #expect(try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"offline"}"#).status == 200)
        let mode = try events.next { $0.type == "connectivity" }
        #expect(try mode.json().string("mode") == "offline")
        #expect(try outbox.send("DELETE", "/admin/operations/\(stored.id)").status == 204)
        let removed = try events.next { $0.type == "operation" }
        #expect(try removed.json().string("status") == "removed", "\(removed)")
        #expect(try removed.json().string("orderingKey") == "user-7", "\(removed)")
    }

    @Test func lastEventIDResumesAfterItAndAnUnknownOneResets() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let first = try EventStreamClient(outbox)
        for mode in ["offline", "auto", "offline"] {
            #expect(try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"\#(mode)"}"#).status == 200)
        }
        let seen = try (0..<3).map { _ in try first.next() }
        #expect(seen.map { try? $0.json().string("mode") } == ["offline", "auto", "offline"], "\(seen)")
        let firstID = try #require(seen[0].id)

        let resumed = try EventStreamClient(outbox, headers: [HeaderField("Last-Event-ID", firstID)])
        let missed = try (0..<2).map { _ in try resumed.next() }
        #expect(missed.map(\.id) == [seen[1].id, seen[2].id], "\(missed)")

        let unknown = try EventStreamClient(outbox, headers: [HeaderField("Last-Event-ID", "999999")])
        let reset = try unknown.next()
        #expect(reset.type == "reset" && reset.id == seen[2].id, "\(reset)")
        #expect(try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"auto"}"#).status == 200)
        #expect(try unknown.next().type == "connectivity")
    }

    @Test func theTokenAndOriginRulesApply() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: #"{"admin": {"token": "s3cret"}}"#)
        #expect(try EventStreamClient(outbox).status == 401)
        #expect(try EventStreamClient(outbox, headers: [HeaderField("Authorization", "Bearer s3cret"),
                                                        HeaderField("Origin", "http://evil.example")]).status == 403)
        let allowed = try EventStreamClient(outbox, headers: [HeaderField("Authorization", "Bearer s3cret")])
        #expect(allowed.status == 200, "\(allowed.head)")
    }

    /// A listener that stops reading is cut off once it is far behind, and meanwhile forwarding
    /// goes on and memory stays flat.
    @Test func aStalledListenerIsDroppedAndCostsNoMemory() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let stalled = try EventStreamClient(outbox, receiveBuffer: 4096)
        let before = try outbox.peakRSSBytes()

        // Connectivity switches, pipelined on one connection, until the listener is dropped:
        // each is one event of ~60 bytes, so it takes some 8 000 (the listener's backlog, the
        // socket's share and the kernel's buffers). The bound is several times that; stopping
        // at the drop keeps the test short on a loaded machine (each switch is a request and a
        // log line of the debug build).
        let maxSwitches = 40_000
        let writer = try outbox.connect()
        let batch = 500
        var sent = 0
        while sent < maxSwitches, !outbox.hasLogged("events_client_dropped") {
            var requests = ""
            for index in sent..<(sent + batch) {
                let body = index % 2 == 0 ? #"{"mode":"offline"}"# : #"{"mode":"auto"}"#
                requests += "PUT /admin/connectivity HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            }
            try writer.send(requests)
            for _ in 0..<batch { #expect(try writer.readResponse(to: "PUT").status == 200) }
            sent += batch
        }
        try await outbox.waitForLog(containing: "events_client_dropped")
        // Forwarding went on the whole time.
        #expect(try outbox.send("GET", "/ping").bodyText == "ok")
        let grown = try outbox.peakRSSBytes() - before
        #expect(grown < 8 << 20, "peak RSS grew by \(grown >> 20) MiB while a listener stalled")
        // Once it reads, the stalled listener finds the end of its stream: the connection
        // closes after what was already on its way (readUntilEOF throws if it stays open), and
        // that is not every switch.
        let received = String(decoding: try stalled.client.readUntilEOF(timeout: .seconds(20)), as: UTF8.self)
        let delivered = received.components(separatedBy: "event: connectivity").count - 1
        #expect(delivered < sent, "the stalled listener got all \(sent) switches: it was never cut off")
    }
}
