import Foundation
import OutboxModel

/// One log record. `created` holds the full request (body included) and the first state;
/// `updated` the new state of an operation (attempt started, completed, failed, conflict,
/// retried); `deleted` removes the operation (admin delete, retention expiry).
public enum LogRecord: Sendable, Equatable {
    case created(OperationRequest, OperationState)
    case updated(UUID, OperationState)
    case deleted(UUID)

    /// The operation the record is about.
    public var id: UUID {
        switch self {
        case .created(let request, _): request.id
        case .updated(let id, _), .deleted(let id): id
        }
    }
}
