import OutboxModel

/// Where one request goes with respect to the admin API, decided from its target and the
/// listener that accepted it.
enum AdminRoute: Equatable {
    /// Proxy traffic: forwarded or queued like any request.
    case proxy
    /// For the admin API, with the path below `admin.pathPrefix` (`/status?x`).
    case admin(String)
    /// Reached the admin listener but lies outside `admin.pathPrefix`: answered 404 there,
    /// never forwarded.
    case notOnAdminListener
}

extension ProxyContext {
    /// The one place that decides what reaches the admin API. On the main listener an admin
    /// target is served by the API only while the API has no listener of its own (and a queue
    /// runs); otherwise it goes upstream, so an upstream's own `/admin` stays reachable. The
    /// admin listener serves nothing but the API.
    /// `intercepted`: the request came through an intercepted tunnel, where every path is the
    /// origin's (its own `/admin` included), never ours.
    func adminRoute(for target: String, on listener: ListenerRole, intercepted: Bool = false) -> AdminRoute {
        if intercepted { return .proxy }
        let subpath = admin?.subpath(of: target)
        switch listener {
        case .main:
            guard !adminHasOwnListener, let subpath else { return .proxy }
            return .admin(subpath)
        case .admin:
            guard let subpath else { return .notOnAdminListener }
            return .admin(subpath)
        }
    }
}
