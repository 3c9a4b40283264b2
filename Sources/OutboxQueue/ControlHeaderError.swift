/// Why a request's `Outbox-*` control headers were refused; the proxy answers `400` with
/// `message`.
public enum ControlHeaderError: Error, Sendable, Equatable {
    /// The header's value is not one it accepts.
    case invalidValue(header: String, value: String)
    /// The header appeared more than once (each may appear at most once).
    case repeated(header: String)
    /// The header appeared more than once with different values (for the one header that may
    /// repeat an equal value).
    case differingValues(header: String)

    /// The header the error is about, in its canonical spelling (`Outbox-Priority`).
    public var header: String {
        switch self {
        case .invalidValue(let header, _), .repeated(let header), .differingValues(let header): header
        }
    }

    /// One line for the client, naming the header and, when there is one, the value.
    public var message: String {
        switch self {
        case .invalidValue(let header, let value): "invalid \(header) header value \"\(value)\""
        case .repeated(let header): "\(header) header given more than once"
        case .differingValues(let header): "\(header) header given more than once with different values"
        }
    }
}
