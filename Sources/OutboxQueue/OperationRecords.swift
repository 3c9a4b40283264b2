import OutboxStorage

/// Where an operation's records are in the log: the `created` record (request, body) and
/// the latest `updated` record (state, stored response).
///
/// Kept in every index record, so it is packed: 40 bytes where two `RecordLocation`s (one
/// optional) take 48. A frame is never empty, so a state length of 0 means "no `updated`
/// record yet".
public struct OperationRecords: Sendable, Equatable {
    private var createdOffset: UInt64
    private var stateOffset: UInt64
    private var createdSegment: UInt32
    private var createdGeneration: UInt32
    private var createdLength: UInt32
    private var stateSegment: UInt32
    private var stateGeneration: UInt32
    private var stateLength: UInt32

    /// The records' places.
    public init(created: RecordLocation, state: RecordLocation?) {
        createdOffset = created.offset
        createdSegment = created.segment
        createdGeneration = created.generation
        createdLength = created.length
        stateOffset = 0
        stateSegment = 0
        stateGeneration = 0
        stateLength = 0
        self.state = state
    }

    /// The `created` record.
    public var created: RecordLocation {
        get { RecordLocation(segment: createdSegment, generation: createdGeneration, offset: createdOffset, length: createdLength) }
        set {
            createdOffset = newValue.offset
            createdSegment = newValue.segment
            createdGeneration = newValue.generation
            createdLength = newValue.length
        }
    }

    /// The latest `updated` record, nil while the state is the one written with `created`.
    public var state: RecordLocation? {
        get {
            guard stateLength != 0 else { return nil }
            return RecordLocation(segment: stateSegment, generation: stateGeneration, offset: stateOffset, length: stateLength)
        }
        set {
            stateOffset = newValue?.offset ?? 0
            stateSegment = newValue?.segment ?? 0
            stateGeneration = newValue?.generation ?? 0
            stateLength = newValue?.length ?? 0
        }
    }
}
