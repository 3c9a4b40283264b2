/// The admin API's route table: each route's path under `admin.pathPrefix` (`{id}` stands for
/// one path segment) and the methods it takes, for dispatch, for `Allow` on a `405`, and for
/// `docs/admin-api.md`, whose route table a test compares with this one.
package enum AdminRoute: CaseIterable, Sendable {
    case dashboard, status, operations, operation, retry, prune, flush, connectivity, drain, metrics
    case faults, fault, events, credentials

    /// The path under the prefix: `/` for the dashboard, `/operations/{id}` for one operation.
    package var template: String {
        switch self {
        case .dashboard: "/"
        case .status: "/status"
        case .operations: "/operations"
        case .operation: "/operations/{id}"
        case .retry: "/operations/{id}/retry"
        case .prune: "/prune"
        case .flush: "/flush"
        case .connectivity: "/connectivity"
        case .drain: "/drain"
        case .metrics: "/metrics"
        case .faults: "/faults"
        case .fault: "/faults/{id}"
        case .events: "/events"
        case .credentials: "/credentials"
        }
    }

    package var methods: [String] {
        switch self {
        case .dashboard, .status, .drain, .metrics: ["GET", "HEAD"]
        case .events: ["GET"]
        case .operations, .operation: ["GET", "HEAD", "DELETE"]
        case .retry, .prune, .flush: ["POST"]
        case .connectivity: ["GET", "HEAD", "PUT"]
        case .faults: ["GET", "HEAD", "POST", "DELETE"]
        case .fault: ["GET", "HEAD", "DELETE"]
        case .credentials: ["GET", "HEAD", "PUT", "DELETE"]
        }
    }

    /// The route whose template the path's segments fill, and the `{id}` segment ("" when the
    /// template has none).
    static func match(_ parts: [Substring]) -> (AdminRoute, String)? {
        for route in allCases {
            let template = route.template.split(separator: "/", omittingEmptySubsequences: true)
            guard template.count == parts.count else { continue }
            var id = ""
            var matched = true
            for (expected, part) in zip(template, parts) {
                if expected == "{id}" {
                    id = String(part)
                } else if expected != part {
                    matched = false
                    break
                }
            }
            if matched { return (route, id) }
        }
        return nil
    }
}
