import OutboxModel

/// What recovery hands the queue for one live operation, in log order, without bodies:
/// enough to rebuild the index.
public struct RecoveredOperation: Sendable {
    /// Request fields except headers and body.
    public var request: OperationSummary
    /// Latest state, with `response` and `conflict` left nil (their bodies stay on disk):
    /// `readState(at: stateAt)` loads them.
    public var state: OperationState
    /// Location of the `created` record.
    public var createdAt: RecordLocation
    /// Location of the latest `updated` record, nil when the state is still the one written
    /// with `created`.
    public var stateAt: RecordLocation?

    /// A recovered operation as recovery builds it.
    public init(request: OperationSummary, state: OperationState, createdAt: RecordLocation, stateAt: RecordLocation?) {
        self.request = request
        self.state = state
        self.createdAt = createdAt
        self.stateAt = stateAt
    }
}
