import OutboxConfig
import OutboxNet

/// Why the server could not start, as the one line `main` prints before exiting 1: a listening
/// socket that could not be opened (the admin one named as such, so a busy `admin.listen` is
/// not mistaken for a busy `listen`), or a system call that failed while setting up the loops.
public enum ServerStartError: Error, CustomStringConvertible, Sendable {
    /// `listen` could not be bound or listened on.
    case listen(SocketAddressSpec, SystemError)
    /// `admin.listen` could not be bound or listened on.
    case adminListen(SocketAddressSpec, SystemError)
    /// Anything else, such as creating an event loop.
    case system(SystemError)
    /// The `tls` settings cannot be used (a certificate, key or CA file OpenSSL refuses): a
    /// config problem, which `main` reports with exit status 2.
    case tls(String)

    /// The process exit status for this error: 2 for a config problem, 1 otherwise.
    public var exitStatus: Int32 {
        if case .tls = self { return 2 }
        return 1
    }

    public var description: String {
        switch self {
        case .listen(let address, let error): "cannot listen on \(address): \(error)"
        case .adminListen(let address, let error): "cannot listen on \(address) (admin.listen): \(error)"
        case .system(let error): "cannot start: \(error)"
        case .tls(let reason): reason
        }
    }
}
