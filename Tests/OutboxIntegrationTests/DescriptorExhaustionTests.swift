import Foundation
import Glibc
import Testing

/// The real binary with an open-file limit of 64 and more idle clients than that (SPEC §6):
/// it stops accepting for a moment instead of spinning, logs it once, answers what it can with
/// `503 local_resources_exhausted`, never blames the origin, and serves again by itself once
/// descriptors are free; and at start it raises a low soft limit to the hard one.
@Suite("Descriptor exhaustion", .harnessThreads)
struct DescriptorExhaustionTests {
    /// Idle clients must stay open for the whole test: no header or idle timeout ends them.
    static let patientLimits = #""limits": {"headerTimeoutSeconds": 120, "idleTimeoutSeconds": 120}"#
    static let idleClients = 80

    /// Opens `idleClients` connections that send nothing: Outbox accepts until its descriptors
    /// run out, the rest wait in the kernel's backlog.
    static func exhaust(_ outbox: OutboxProcess) throws -> [RawClient] {
        try (0..<idleClients).map { _ in try outbox.connect() }
    }

    static func exhaustedLines(_ outbox: OutboxProcess) -> [String] {
        completeLines(outbox.stderrText).filter { $0.contains("server_fd_exhausted") }
    }

    @Test func outOfDescriptors_ItPausesAcceptingWithoutSpinning_BlamesNoOrigin_AndServesAgainWhenTheyAreFree() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: "{\(Self.patientLimits)}",
                                                   launcher: OutboxProcess.withOpenFileLimit(soft: 64, hard: 64))
        var idle = try Self.exhaust(outbox)
        // Without a pause (old code) this line never comes; the CPU time below shows the spin.
        try? await outbox.waitForLog(containing: "server_fd_exhausted", timeout: .seconds(10))

        // A measurement window, not a synchronisation: an accept loop that spins uses a whole
        // core (2 s in 2 s); paused listeners wake at most a few times a second.
        let cpuBefore = try outbox.cpuSeconds()
        try await Task.sleep(for: .seconds(2))
        let cpuUsed = try outbox.cpuSeconds() - cpuBefore
        #expect(cpuUsed < 0.5, "Outbox used \(cpuUsed) s of CPU in 2 s with its descriptors exhausted\n\(outbox)")

        // A request on a connection accepted before the shortage needs an upstream socket it
        // cannot get: a 503 of its own, not a hang and not the origin's fault.
        try idle[0].send("GET /during HTTP/1.1\r\nHost: h\r\n\r\n")
        let during = try idle[0].readResponse()
        expectErrorResponse(during, status: 503, from: outbox)
        #expect(during.errorEnvelope?.code == "local_resources_exhausted", "\(during)\n\(outbox)")
        #expect(during.headers["Retry-After"] == "1", "\(during)")

        let lines = Self.exhaustedLines(outbox)
        #expect(lines.count == 1, "server_fd_exhausted logged \(lines.count) times in one episode:\n\(outbox)")
        #expect(lines.first?.contains(" warn ") == true && lines.first?.contains("Too many open files") == true,
                "\(lines)")

        // Enough descriptors freed for the backlog (the idle clients queued there, closed now,
        // are accepted and dropped) and for the admin request behind them.
        for client in idle[10...] { client.close() }
        idle.removeSubrange(10...)
        let status = try JSONObject(outbox.admin("status", timeout: .seconds(30)))
        let origin = try #require(status.objects("origins")?.first { $0.string("origin") == upstream.baseURL },
                                  "\(status)\n\(outbox)")
        #expect(origin.bool("online") == true, "the origin was blamed for Outbox's shortage: \(origin)\n\(outbox)")
        #expect(origin.isNull("lastError"), "\(origin)")
        #expect(!status.text.contains("Too many open files"), "\(status)")
        try await outbox.waitForLog(containing: "server_fd_recovered")

        for client in idle { client.close() }
        let after = try outbox.exchange("GET /after HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
                                        timeout: .seconds(30))
        #expect(after.status == 200, "\(after)\n\(outbox)")
        #expect(upstream.requests.map(\.target) == ["/after"], "the upstream saw \(upstream.requests)")
        #expect(outbox.child.isRunning)
    }

    @Test func outOfDescriptors_AWriteIsAnswered503NotStored_AndAQueuedWriteSpendsNoRetry() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {\(Self.patientLimits), "reachability": {"probeIntervalSeconds": 0.1}, "retry": {"preset": "immediate"}}
            """, launcher: OutboxProcess.withOpenFileLimit(soft: 64, hard: 64))
        // Accepted before the idle clients: the connection the test speaks on.
        let client = try outbox.connect()
        try client.send("GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\n\r\n")
        try #require(client.readResponse().status == 200)
        var idle = try Self.exhaust(outbox)
        try await outbox.waitForLog(containing: "server_fd_exhausted", timeout: .seconds(10))

        // A write the origin could have taken: Outbox could not ask it, so it is not stored as
        // if the origin were down (a 202 would promise a delivery for an origin that is up).
        try client.send("POST /orders HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\na")
        let refused = try client.readResponse(to: "POST")
        expectErrorResponse(refused, status: 503, from: outbox)
        #expect(refused.errorEnvelope?.code == "local_resources_exhausted", "\(refused)\n\(outbox)")

        // A write the client asked to queue is stored; its replay cannot get a socket either,
        // which spends none of its retries ("immediate" has 3, 0.1 s apart).
        try client.send("POST /orders HTTP/1.1\r\nHost: h\r\nOutbox-Mode: queue\r\nContent-Length: 1\r\n\r\nb")
        let queued = try QueuedOperation(client.readResponse(to: "POST"))
        let id = queued.id
        try await outbox.waitForStderr("two replay attempts of \(id) without a socket", timeout: .seconds(15)) { lines in
            lines.filter { $0.contains(" replay ") && $0.contains(id) && $0.contains("local resources exhausted") }.count >= 2
        }
        let attempts = completeLines(outbox.stderrText).filter { $0.contains(" replay ") && $0.contains(id) }
        #expect(attempts.allSatisfy { $0.contains("attempt=1 ") && $0.contains("status=pending") }, "\(attempts)")
        try client.send("GET /admin/operations/\(queued.id) HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\n\r\n")
        let waiting = try JSONObject(client.readResponse())
        #expect(waiting.int("retryCount") == 0, "\(waiting)")
        #expect(["pending", "inProgress"].contains(waiting.string("status") ?? ""), "\(waiting)")
        try client.send("GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\n\r\n")
        let status = try JSONObject(client.readResponse())
        let origin = try #require(status.objects("origins")?.first { $0.string("origin") == upstream.baseURL }, "\(status)")
        #expect(origin.bool("online") == true, "\(origin)\n\(outbox)")
        #expect(origin.isNull("lastError"), "\(origin)")

        for each in idle { each.close() }
        idle.removeAll()
        let delivered = try await upstream.waitForRequests(1, timeout: .seconds(30))
        #expect(delivered.map(\.bodyText) == ["b"], "the refused write reached the upstream after all: \(delivered)")
        #expect(delivered.first?.headers["Outbox-Attempt"] == "1", "\(delivered.first.map { "\($0)" } ?? "-")")
        let completed = try await outbox.waitForOperation(queued.id, toBe: ["completed"], timeout: .seconds(30))
        #expect(completed.int("retryCount") == 0, "\(completed)")
    }

    /// Probes run on Dispatch workers; libdispatch aborts the process when its pool monitor finds
    /// no descriptor for `/proc/<tid>/stat` while such work waits. Outbox must keep some free.
    @Test func outOfDescriptors_WhileAnOfflineOriginIsProbed_ItStaysUp_AndDeliversOnceTheOriginIsBack() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {\(Self.patientLimits), "reachability": {"probeIntervalSeconds": 0.1}}
            """, launcher: OutboxProcess.withOpenFileLimit(soft: 64, hard: 64))
        let queued = try outbox.enqueue("/orders", body: "kept")
        var idle = try Self.exhaust(outbox)
        try? await outbox.waitForLog(containing: "server_fd_exhausted", timeout: .seconds(10))

        // An observation window, not a synchronisation: some 50 probe intervals, each of them
        // Dispatch work, with the listeners paused; on the old code the process died in it.
        try await Task.sleep(for: .seconds(5))
        #expect(outbox.child.isRunning, "Outbox died with its descriptors exhausted:\n\(outbox)")
        try #require(outbox.child.isRunning)

        try upstream.restart()
        for client in idle { client.close() }
        idle.removeAll()
        let delivered = try await upstream.waitForRequests(1, timeout: .seconds(30))
        #expect(delivered.map(\.bodyText) == ["kept"], "\(delivered)")
        let completed = try await outbox.waitForOperation(queued.id, toBe: ["completed"], timeout: .seconds(30))
        #expect(completed.int("retryCount") == 0, "a probe or attempt without a socket spent a retry: \(completed)")
    }

    @Test func atStart_ALowSoftOpenFileLimitIsRaisedToTheHardOne_AndBothAreLogged() async throws {
        var own = rlimit()
        try #require(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &own) == 0)
        // A hard limit the test may set without privileges: at most its own.
        let hard = Int(min(UInt64(own.rlim_max), 4096))
        try #require(hard > 64, "the test's own hard limit is \(own.rlim_max)")
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL,
                                                   launcher: OutboxProcess.withOpenFileLimit(soft: 64, hard: hard))
        try await outbox.waitForLogLine(containing: ["info open_files_limit", "soft=\(hard)", "hard=\(hard)", "was=64"])
        let limit = try outbox.openFileLimit()
        #expect(limit.soft == String(hard), "\(limit)")
        #expect(limit.hard == String(hard), "\(limit)")
    }
}
