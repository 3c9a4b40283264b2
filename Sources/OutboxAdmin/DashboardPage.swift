/// The operator's dashboard (`GET {prefix}/`): one self-contained HTML page with
/// inline CSS and vanilla JS, no external assets, so it works on a machine with no network.
/// It polls `{prefix}/status` and `{prefix}/operations?limit=100` every 2 s and drives the
/// admin API's write endpoints (retry, delete, clear failed, prune, flush, connectivity).
///
/// The page is `Resources/dashboard.html`, compiled into the binary as bytes
/// (`PackageResources.dashboard_html`), so it can be edited as HTML and the binary still runs
/// alone. It only makes same-origin requests (path-absolute URLs under the prefix), which is
/// what `AdminGate` lets through from a browser; it never puts data into `innerHTML`, so an
/// operation's URL or error text cannot inject markup. Stable ids and `data-` attributes
/// (`count-pending`, `data-op-id`, `btn-offline`, ...) are part of its contract with
/// `Tests/Scripts/dashboard_test.py`.
enum DashboardPage {
    /// Stands in the file for the prefix as a whole JavaScript string literal
    /// (`const PREFIX = __OUTBOX_ADMIN_PREFIX__;`); the page's only substitution.
    static let prefixPlaceholder = Array("__OUTBOX_ADMIN_PREFIX__".utf8)

    /// The page for an admin API mounted at `prefix` (`/admin`, no trailing slash). The prefix
    /// is fixed for the process's life, so `AdminAPI` builds this once at start-up.
    static func html(prefix: String) -> String {
        html(template: PackageResources.dashboard_html, prefix: prefix)
    }

    /// `template` with the placeholder filled in. The file ends with a newline, as text files
    /// do; the page has never been served with one, so it is dropped.
    static func html(template: [UInt8], prefix: String) -> String {
        var page = template[...]
        if page.last == UInt8(ascii: "\n") { page = page.dropLast() }
        return String(decoding: page.replacing(prefixPlaceholder, with: Array(scriptStringLiteral(prefix).utf8)), as: UTF8.self)
    }

    /// `text` as a JavaScript string literal safe inside `<script>`: everything but a few
    /// plain path characters becomes `\uXXXX`, so neither a quote nor `</script>` in a
    /// configured prefix can end the literal or the element.
    static func scriptStringLiteral(_ text: String) -> String {
        var out = "\""
        for unit in text.utf16 {
            switch unit {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2F, 0x2D, 0x2E, 0x5F, 0x7E:
                out += String(UnicodeScalar(UInt8(unit)))
            default:
                let hex = String(unit, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
        }
        return out + "\""
    }
}
