/// What a client connection hands its socket to once it carries no more HTTP requests (a
/// `CONNECT` tunnel, an event stream): the connection reports its socket's events, the relay
/// decides what to do with them.
protocol ConnectionRelay: AnyObject {
    /// Client bytes arrived.
    func clientReadable()
    /// The client's socket took the queued output.
    func clientDrained()
    /// The client sent EOF.
    func clientEnded()
    /// The connection is closing: let go of everything.
    func close()
}
