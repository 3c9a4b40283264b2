/// What a one-shot upstream call needs from the event loop it runs on: the loop and its
/// keep-alive pool. The proxy's per-loop
/// state provides it, so this layer never knows client connections.
package protocol UpstreamLoop: AnyObject {
    var loop: EventLoop { get }
    var pool: UpstreamPool { get }
    /// What replay attempts are sent through: the pool, or a layer in front of it (fault rules).
    var replayTransport: UpstreamTransport { get }
}
