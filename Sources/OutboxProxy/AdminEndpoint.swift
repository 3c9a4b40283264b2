import OutboxHTTP
import OutboxModel

/// The admin API as the proxy path reaches it: who may use it, and serving one request whose
/// body is complete. The proxy layer never imports the admin layer; the service injects the
/// real API (with its gate) through this seam.
package protocol AdminEndpoint: Sendable {
    /// The path below `admin.pathPrefix` (`/status?x`), or nil when `target` is not an admin
    /// target.
    func subpath(of target: String) -> String?
    /// The answer refusing this request (token, loopback peer, proxy hop, `Host`, `Origin`), or nil when
    /// it may proceed.
    func refusal(for head: HTTPRequestHead, peerIsLoopback: Bool) -> AdminResponse?
    /// Serves one admin request.
    func handle(_ request: AdminRequest) async -> AdminResponse
}
