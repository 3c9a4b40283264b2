/// What a one-shot upstream call needs from the event loop it runs on: the loop and its
/// keep-alive pool. The proxy's per-loop
/// state provides it, so this layer never knows client connections.
package protocol UpstreamLoop: AnyObject {
    var loop: EventLoop { get }
    var pool: UpstreamPool { get }
}
