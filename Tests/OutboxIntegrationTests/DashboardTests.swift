import Foundation
import TestPrerequisites
import Testing

/// The admin dashboard (`GET /admin/`): served as one self-contained HTML page, and
/// usable in a real browser against a proxy holding queued operations. The browser test needs
/// Chromium, chromedriver and Selenium (Debian's chromium, chromium-driver and python3-selenium,
/// `Tests/Scripts/install-browser.sh`); without them it is skipped, saying which is missing, or
/// fails under CI=true.
@Suite("Admin dashboard", .harnessThreads)
struct DashboardTests {
    /// A Python that has Selenium (apt's python3-selenium is for /usr/bin/python3 only).
    static let python = Prerequisite.python(importing: ["selenium"])
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scripts/dashboard_test.py").path

    /// What the browser test lacks, empty when it can run.
    static let missingBrowserTools: [String] = {
        var missing: [String] = []
        if ChildProcess.which("chromium") == nil && ChildProcess.which("chromium-browser") == nil {
            missing.append("chromium")
        }
        if ChildProcess.which("chromedriver") == nil { missing.append("chromedriver") }
        if python == nil { missing.append("python3 with selenium") }
        return missing
    }()

    /// Where the browser test leaves its screenshot: `$OUTBOX_DASHBOARD_SCREENSHOT`, else a
    /// fixed name in the temp dir, so CI can keep it as an artifact.
    static var screenshotPath: String {
        if let path = ProcessInfo.processInfo.environment["OUTBOX_DASHBOARD_SCREENSHOT"], !path.isEmpty { return path }
        return URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("outbox-dashboard.png").path
    }

    @Test func dashboardIsServedAsOneSelfContainedHTMLPage() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        for target in ["/admin/", "/admin"] {
            let response = try outbox.send("GET", target)
            #expect(response.status == 200, "GET \(target): \(response)")
            #expect(response.headers["Content-Type"]?.lowercased().hasPrefix("text/html") == true, "GET \(target): \(response)")
            let page = response.bodyText
            #expect(page.lowercased().hasPrefix("<!doctype html>"), "GET \(target): \(page.prefix(200))")
            #expect(page.contains(#"id="count-pending""#) && page.contains(#"id="btn-offline""#))
            // Works offline and leaks nothing to other hosts: no absolute URL anywhere, and
            // every script and stylesheet is inline.
            #expect(!page.contains("http://") && !page.contains("https://"), "the page names an external URL")
            #expect(!page.contains("<script src") && !page.contains("<link"), "the page loads an external asset")
            #expect(!page.contains("__OUTBOX_ADMIN_PREFIX__"), "the admin prefix was not filled in")
        }
    }

    @Test(.requires(missingBrowserTools.isEmpty,
                   "needs \(missingBrowserTools.joined(separator: ", ")): run Tests/Scripts/install-browser.sh"))
    func dashboardInChromiumListsQueuedOperationsSwitchesOfflineAndDeletesOne_ShowsAWriteFromAnEvent_AndAddsAFault() async throws {
        let python = try #require(Self.python)
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let queued = try (1...3).map { try outbox.enqueue("/items/\($0)", body: "item \($0)") }
        let screenshot = Self.screenshotPath
        try? FileManager.default.removeItem(atPath: screenshot)

        let result = try await ChildProcess.run("/usr/bin/env", [
            python, Self.script, outbox.baseURL, screenshot, "--expect-pending", "3",
        ], timeout: .seconds(300))
        // Required: when the script failed, what the API says next is noise.
        try #require(result.exit == .exited(0),
                "dashboard_test.py: \(result.exit)\nstdout:\n\(result.stdoutText)\nstderr:\n\(result.stderrText)\n\(outbox)")

        // What the clicks did, as the API (not the page) reports it.
        let status = try JSONObject(try outbox.admin("status"))
        #expect(status.string("connectivity") == "offline", "\(status)")
        // Three queued, one deleted from the page, one queued by the script to watch it arrive.
        #expect(status.object("counts")?.int("pending") == 3, "\(status)")
        #expect(try outbox.admin("operations/\(queued[0].id)").status == 404, "the first operation was not deleted")
        for survivor in queued.dropFirst() {
            #expect(try outbox.operation(survivor.id).string("status") == "pending")
        }
        let faults = try JSONObject(try outbox.admin("faults")).objects("faults") ?? []
        #expect(faults.map { $0.int("status") } == [418], "the fault added from the page: \(faults)")
        let png = try #require(FileManager.default.contents(atPath: screenshot), "no screenshot at \(screenshot)")
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "the screenshot is not a PNG")
    }

    @Test(.requires(missingBrowserTools.isEmpty,
                   "needs \(missingBrowserTools.joined(separator: ", ")): run Tests/Scripts/install-browser.sh"))
    func dashboardInChromiumMarksAnOriginWhoseCredentialsWereRefused() async throws {
        let python = try #require(Self.python)
        let upstream = try TestUpstream { _ in .respond(.text("token expired", status: 401)) }
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxDelaySeconds": 3600"#)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config)
        let queued = try outbox.enqueue(body: "x", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await outbox.waitForOperation(queued.id, describedAs: "held with auth: 401") { $0.string("lastError") == "auth: 401" }
        let screenshot = Self.screenshotPath.replacingOccurrences(of: ".png", with: "-auth.png")
        let result = try await ChildProcess.run("/usr/bin/env", [
            python, Self.script, outbox.baseURL, screenshot, "--expect-auth-required", upstream.baseURL,
        ], timeout: .seconds(300))
        #expect(result.exit == .exited(0), "dashboard_test.py: \(result.exit)\nstdout:\n\(result.stdoutText)\nstderr:\n\(result.stderrText)")
    }
}
