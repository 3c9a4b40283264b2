import OutboxModel

/// What recovery hands back for one live operation, in log order, without bodies: the
/// operation and where its records are, enough to rebuild an index.
public struct RecoveredOperation: Sendable {
    /// The operation with its latest state, `response` and `conflict` left nil (their bodies
    /// stay on disk): `readState(at: stateAt)` loads them.
    public var operation: OperationSnapshot
    /// Location of the `created` record.
    public var createdAt: RecordLocation
    /// Location of the latest `updated` record, nil when the state is still the one written
    /// with `created`.
    public var stateAt: RecordLocation?

    /// A recovered operation as recovery builds it.
    public init(operation: OperationSnapshot, createdAt: RecordLocation, stateAt: RecordLocation?) {
        self.operation = operation
        self.createdAt = createdAt
        self.stateAt = stateAt
    }
}
