@testable import OutboxAdmin
import Testing

/// The dashboard is `Resources/dashboard.html` compiled in as bytes, with the admin prefix
/// filled in once; what is served must be the file and nothing else.
@Suite("Dashboard page: the embedded file with the prefix filled in")
struct DashboardPageTests {
    static func count(_ needle: [UInt8], in haystack: [UInt8]) -> Int {
        haystack.ranges(of: needle).count
    }

    @Test func theEmbeddedFileHasThePrefixPlaceholderExactlyOnce() {
        #expect(Self.count(DashboardPage.prefixPlaceholder, in: PackageResources.dashboard_html) == 1)
    }

    @Test func theServedPageIsTheFileWithThePrefixAsAScriptLiteralAndNoFinalNewline() {
        let template = Array("<script>const PREFIX = __OUTBOX_ADMIN_PREFIX__;</script>\n".utf8)
        #expect(DashboardPage.html(template: template, prefix: "/admin") == #"<script>const PREFIX = "/admin";</script>"#)
        #expect(DashboardPage.html(template: template.dropLast(), prefix: "/admin")
                == #"<script>const PREFIX = "/admin";</script>"#)
    }

    @Test func aPrefixCannotEndTheLiteralOrTheScriptElement() {
        let page = DashboardPage.html(prefix: #"/x"</script>'&<b>"#)
        #expect(page.contains(#"const PREFIX = "/x\u0022\u003c/script\u003e\u0027\u0026\u003cb\u003e";"#))
        #expect(!page.contains("__OUTBOX_ADMIN_PREFIX__"))
        #expect(page.hasPrefix("<!DOCTYPE html>\n") && page.hasSuffix("</html>"))
    }
}
