import Foundation
import Testing

/// The admin API's writing endpoints and its gate, through real sockets.
@Suite("Admin API", .harnessThreads)
struct AdminTests {
    @Test(arguments: TestStore.both) func retryOfAFailedOperationLeadsToDelivery(store: TestStore) async throws {
        let fixed = Gate()
        let upstream = try TestUpstream { _ in
            fixed.isOpen ? .respond(.text("created", status: 201)) : .respond(.text("bad input", status: 400))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let queued = try outbox.enqueue(body: "x", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await outbox.waitForOperation(queued.id, toBe: ["failed"])

        fixed.open()
        let retried = try outbox.send("POST", "/admin/operations/\(queued.id)/retry")
        #expect(retried.status == 200, "\(retried)")
        let done = try await outbox.waitForOperation(queued.id, toBe: ["completed"])
        #expect(done.int("retryCount") == 0, "\(done)")
        #expect(upstream.requests.count == 2)
        // A completed operation is not retried again.
        let again = try outbox.send("POST", "/admin/operations/\(queued.id)/retry")
        expectErrorResponse(again, status: 409, from: outbox)
    }

    @Test(arguments: TestStore.both) func deleteAnswers204ThenTheOperationIs404(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let queued = try outbox.enqueue(body: "doomed")
        let deleted = try outbox.send("DELETE", "/admin/operations/\(queued.id)")
        #expect(deleted.status == 204, "\(deleted)")
        #expect(deleted.body.isEmpty)
        #expect(try outbox.admin("operations/\(queued.id)").status == 404)
        expectErrorResponse(try outbox.send("DELETE", "/admin/operations/\(queued.id)"), status: 404, from: outbox)
    }

    @Test(arguments: TestStore.both) func deleteByStatusReportsHowManyWereRemoved(store: TestStore) async throws {
        let upstream = try TestUpstream { request in
            request.bodyText.hasPrefix("bad") ? .respond(.text("no", status: 400)) : .respond(.text("ok", status: 201))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        var ids: [String] = []
        for body in ["bad-1", "bad-2", "good"] {
            ids.append(try outbox.enqueue(body: body, headers: [HeaderField("Outbox-Mode", "queue")]).id)
        }
        try outbox.drain()
        let removed = try outbox.send("DELETE", "/admin/operations?status=failed")
        #expect(removed.status == 200)
        #expect(removed.bodyText.contains(#""removed":2"#) || removed.bodyText.contains(#""removed": 2"#), "\(removed)")
        #expect(try outbox.admin("operations/\(ids[0])").status == 404)
        #expect(try outbox.operation(ids[2]).string("status") == "completed")
        expectErrorResponse(try outbox.send("DELETE", "/admin/operations?status=lost"), status: 400, from: outbox)
    }

    @Test(arguments: TestStore.both) func listAndDeleteByStatusRejectAnUnknownStatusAlikeAndDeleteNothing(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let queued = try outbox.enqueue(body: "kept")
        let listed = try outbox.send("GET", "/admin/operations?status=lost")
        let deleted = try outbox.send("DELETE", "/admin/operations?status=lost")
        expectErrorResponse(listed, status: 400, from: outbox)
        expectErrorResponse(deleted, status: 400, from: outbox)
        #expect(listed.errorEnvelope?.code == "bad_request")
        #expect(listed.errorEnvelope?.message.hasPrefix("status: ") == true, "\(listed)")
        #expect(listed.errorEnvelope?.message == deleted.errorEnvelope?.message, "\(listed)\n\(deleted)")
        #expect(try outbox.operation(queued.id).string("status") == "pending")
    }

    @Test(arguments: TestStore.both) func offlineSwitchQueuesWritesWithTheUpstreamUpAndDeliversNothingUntilAuto(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok", status: 201)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let off = try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"offline"}"#,
                                  headers: [HeaderField("Content-Type", "application/json")])
        #expect(off.status == 200, "\(off)")
        let queued = try outbox.enqueue(body: "while offline")
        expectErrorResponse(try outbox.send("GET", "/read"), status: 503, from: outbox)
        let stillDown = try outbox.admin("drain?timeoutSeconds=0.3")
        #expect(stillDown.status == 504)
        #expect(upstream.requests.isEmpty, "something reached the upstream while offline")
        #expect(try outbox.admin("status").bodyText.contains(#""connectivity":"offline""#) ||
                (try outbox.admin("status").bodyText.contains(#""connectivity": "offline""#)))

        let auto = try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"auto"}"#)
        #expect(auto.status == 200)
        try outbox.drain()
        #expect(try outbox.operation(queued.id).string("status") == "completed")
        #expect(upstream.requests.map(\.bodyText) == ["while offline"])
        expectErrorResponse(try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"sometimes"}"#), status: 400, from: outbox)
    }

    /// curl asks for a Continue before larger bodies and waits a second for it otherwise.
    @Test(arguments: TestStore.both) func anAdminRequestAskingForContinue_GetsItBeforeItsBody(store: TestStore) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, store: store)
        let body = #"{"mode":"offline"}"#
        let client = try outbox.connect()
        try client.send("PUT /admin/connectivity HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\nExpect: 100-continue\r\n\r\n")
        let interim = try client.readResponse(timeout: .seconds(5))
        #expect(interim.status == 100, "\(interim)\n\(outbox)")
        try client.send(body)
        let final = try client.readResponse()
        #expect(final.status == 200, "\(final)\n\(outbox)")
        #expect(try outbox.admin("status").bodyText.contains("offline"))
    }

    @Test(arguments: TestStore.both) func flushAndPruneAnswerAsSpecified(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        _ = try outbox.enqueue(body: "old")
        #expect(try outbox.send("POST", "/admin/flush").status == 202)
        let pruned = try outbox.send("POST", "/admin/prune?olderThanSeconds=0")
        #expect(pruned.status == 200)
        #expect(pruned.bodyText.contains("\"removed\""), "\(pruned)")
        expectErrorResponse(try outbox.send("POST", "/admin/prune"), status: 400, from: outbox)
        let wrongMethod = try outbox.send("POST", "/admin/status")
        expectErrorResponse(wrongMethod, status: 405, from: outbox)
        #expect(wrongMethod.headers["Allow"] != nil)
        expectErrorResponse(try outbox.admin("nowhere"), status: 404, from: outbox)
    }

    @Test(arguments: TestStore.both) func tokenIsRequiredWhenConfigured(store: TestStore) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: #"{"admin": {"token": "s3cret-token"}}"#, store: store)
        expectErrorResponse(try outbox.admin("status"), status: 401, from: outbox)
        let wrong = try outbox.send("GET", "/admin/status", headers: [HeaderField("Authorization", "Bearer nope")])
        expectErrorResponse(wrong, status: 401, from: outbox)
        let right = try outbox.send("GET", "/admin/status", headers: [HeaderField("Authorization", "Bearer s3cret-token")])
        #expect(right.status == 200, "\(right)")
    }

    @Test(arguments: TestStore.both) func crossSiteOriginAndForeignHostAreRefused(store: TestStore) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, store: store)
        let crossSite = try outbox.send("GET", "/admin/status", headers: [HeaderField("Origin", "http://evil.example")])
        expectErrorResponse(crossSite, status: 403, from: outbox)
        let sameSite = try outbox.send("GET", "/admin/status", headers: [HeaderField("Origin", "http://127.0.0.1:\(outbox.port)")])
        #expect(sameSite.status == 200, "\(sameSite)")
        let client = try outbox.connect()
        try client.send("GET /admin/status HTTP/1.1\r\nHost: rebound.example:\(outbox.port)\r\n\r\n")
        expectErrorResponse(try client.readResponse(), status: 403, from: outbox)
    }

    @Test(arguments: TestStore.both) func authorizationIsRedactedInTheAdminViewButReachesTheUpstream(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok", status: 201)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let queued = try outbox.enqueue(body: "secret", headers: [
            HeaderField("Outbox-Mode", "queue"), HeaderField("Authorization", "Bearer user-secret"),
        ])
        try outbox.drain()
        let detail = try outbox.admin("operations/\(queued.id)")
        #expect(detail.bodyText.contains("[redacted]"), "\(detail)")
        #expect(!detail.bodyText.contains("user-secret"), "the admin view leaked the Authorization value")
        let delivered = try await upstream.waitForRequests(1)
        #expect(delivered.first?.headers["Authorization"] == "Bearer user-secret")
    }
}
