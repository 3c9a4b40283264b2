import OutboxAdmin
import OutboxHTTP
import OutboxModel
import OutboxProxy

/// The admin API behind its gate, as the proxy path reaches it: the proxy layer defines the
/// seam, the admin layer never sees it, and this is where the two meet.
struct GatedAdminAPI: AdminEndpoint {
    let api: AdminAPI
    let gate: AdminGate

    func subpath(of target: String) -> String? {
        AdminGate.subpath(of: target, prefix: api.prefix)
    }

    func refusal(for head: HTTPRequestHead, peerIsLoopback: Bool) -> AdminResponse? {
        gate.refusal(for: head, peerIsLoopback: peerIsLoopback)
    }

    func handle(_ request: AdminRequest) async -> AdminResponse {
        await api.handle(request)
    }
}
