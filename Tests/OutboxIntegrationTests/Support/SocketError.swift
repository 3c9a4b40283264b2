import Glibc

/// Why a harness socket operation failed, precise enough for a test to assert on (a refused
/// connection is an expected outcome in shutdown tests, a timeout never is).
enum SocketError: Error, Equatable, CustomStringConvertible {
    case refused
    case timedOut(String)
    case reset
    case closed(String)
    case system(String, Int32)

    var description: String {
        switch self {
        case .refused: "connection refused"
        case .timedOut(let what): "timed out \(what)"
        case .reset: "connection reset by peer"
        case .closed(let what): "connection closed \(what)"
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}
