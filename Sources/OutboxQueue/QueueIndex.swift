import Foundation
import OutboxModel

/// The in-memory index of every stored operation: lookups by id and idempotency key, counts
/// by status, listing in queue order, and the replay lanes (the rules below). Pure
/// bookkeeping: the storage layer persists every change first, then tells the index.
///
/// Layout, for a million operations in well under 200 MB: one contiguous array of compact
/// records in creation order (removal leaves a tombstone; the array is compacted when
/// tombstones outnumber live records), two `SlotTable`s (id → slot, key → slot) and, per
/// lane and priority, a `LaneHeap` of the pending operations that are ready to go.
///
/// A lane is an origin plus an ordering key (`Outbox-Ordering-Key`); operations without one
/// share the origin's default lane. Ordering rules, per lane:
/// - One operation at a time: while one is `inProgress` the lane is busy.
/// - An operation once attempted (it has a `lastAttemptAt`: an attempt of it started, or may
///   have, before a crash) stays the lane's head until it ends: priority orders only what was
///   not attempted. Attempted ones (one per lane, but a restart may find more) come first, by
///   priority then creation order; they sit in the lane's `started` heap.
/// - Otherwise highest priority first, first-in first-out (creation order) within a priority.
/// - The head of the lane backing off (`nextAttemptAt` in the future) makes the lane wait:
///   later operations do not overtake a retrying one, whatever their priority. Other lanes of
///   the origin go on.
/// - An operation whose `dependsOn` is pending or in progress is set aside, and the lane goes
///   on with the others. It cannot block the lane: its dependency may sit behind it (lower
///   priority) or in another lane or origin, and blocking would then deadlock or couple lanes
///   that must replay independently. Operations depending on a set-aside one are set aside
///   too, because their own dependency is not completed. Once the dependency completes, the
///   operation rejoins its lane at its creation-order place.
/// - When the dependency ends `failed` or `conflict`, the operation is reported in
///   `LaneStep.dependencyFailed` so the caller fails it.
/// - A dependency that is not in the index counts as completed. Ids only leave the index by
///   retention (they were completed) or by an admin delete or prune, which an operator chose;
///   and after a restart a removed dependency is indistinguishable from a retained-and-removed
///   one, so "missing = satisfied" is the only rule that behaves the same before and after.
///   Consequence: insert operations in creation order (the storage replays its log in order),
///   or a dependency inserted after its dependent is not seen.
///
/// Which lane of an origin goes next (`nextReady`): round-robin over the lanes whose head may
/// go. A lane joins the back of its origin's ready queue when its head becomes deliverable
/// (its first operation arrives, its attempt ends and more is queued, its backoff ends), and
/// leaves it while an attempt is in flight; so a lane with a long backlog delivers one
/// operation per round like every other and cannot starve them. Lanes whose head backs off
/// wait in a second heap ordered by retry time and join the ready queue once due. Every
/// step is O(log lanes); nothing scans the operations.
///
/// A value type with no locking of its own: `OutboxQueue` keeps it behind one `Mutex`, since
/// the event loops ask it synchronous questions on every queueable request (an actor hop per
/// request would cost more than the lookup). `Locator` is whatever the storage layer needs to find
/// an operation's records again (segment, offset, length…); the index only keeps it.
public struct QueueIndex<Locator: Sendable>: Sendable {
    /// One operation as the index knows it: the `OperationSnapshot` fields the index keeps
    /// (method, target, fingerprint and response bodies stay on disk, so that a million
    /// operations fit in memory), its state spread out as the compact record stores it, and
    /// what only the index has: the creation `sequence` and the storage `locator`.
    public struct Entry: Sendable {
        /// Operation id.
        public var id: UUID
        /// Where its requests go.
        public var origin: Origin
        /// Its idempotency key, exactly as stored.
        public var idempotencyKey: String
        /// Current status.
        public var status: OperationStatus
        /// Replay priority.
        public var priority: OperationPriority
        /// Creation order: strictly increasing in insertion order, never reused in this index's
        /// life, so it serves as a stable pagination cursor.
        public var sequence: UInt64
        /// Creation time, ms since the epoch.
        public var createdAt: Int64
        /// Retries made so far.
        public var retryCount: Int
        /// Attempts that may have started (`OperationState.attempts`).
        public var attempts: Int
        /// Start of the last attempt, ms since the epoch.
        public var lastAttemptAt: Int64?
        /// Not before this (ms since the epoch); nil once finished.
        public var nextAttemptAt: Int64?
        /// The operation it waits for.
        public var dependsOn: UUID?
        /// Its `Outbox-Tag`.
        public var tag: String?
        /// Its `Outbox-Ordering-Key`; nil: the origin's default lane.
        public var orderingKey: String?
        /// Last error, cut to `QueueIndex.maxErrorLength` characters (storage has it whole).
        public var lastError: String?
        /// Where the storage keeps it.
        public var locator: Locator

        /// The state the index holds: `response` and `conflict` are on disk only.
        public var state: OperationState {
            OperationState(status: status, retryCount: retryCount, lastAttemptAt: lastAttemptAt,
                           nextAttemptAt: nextAttemptAt, lastError: lastError, attempts: attempts)
        }
    }

    /// Longest `lastError` kept in the index, in characters.
    public static var maxErrorLength: Int { 160 }

    /// Where a record stands in the lane structures.
    enum Placement: UInt8, Sendable {
        /// Finished or removed: in no lane structure.
        case none
        /// Pending, never attempted, and free to go: in its lane's heap for its priority.
        case ready
        /// Pending, attempted before, and free to go: in its lane's `started` heap.
        case started
        /// Pending, dependency pending or in progress: in `dependents[dependency]`.
        case waiting
        /// Pending, dependency failed or conflict: in `dependents[dependency]` and the lane's
        /// `dependencyFailed` set.
        case doomed
        /// In progress: counted in the lane's `inFlight`.
        case inFlight
    }

    /// The stored form of an entry, 128 bytes with `OperationRecords` as the locator (a million
    /// records in a 2^20-slot array: 128 MiB). Fields most operations never set (tag, last
    /// error, dependency) live in one `Extras` box that is nil for an operation
    /// with none of them, so they cost 8 bytes instead of ~50; a further rarely-set field
    /// belongs there too, not inline. Field order puts the 17-byte key and the 1-byte fields
    /// into what would otherwise be padding; `attempts` fills the last 4 bytes of it, and the
    /// placement shares its byte with the attempt mark and the removal flag (`bits`).
    struct Record: Sendable {
        var id: UUID
        var sequence: UInt64
        var createdAt: Int64
        var lastAttemptAt: Int64
        var nextAttemptAt: Int64
        var extras: Extras?
        var key: IndexedKey
        /// nil: removed (a tombstone awaiting compaction).
        var status: OperationStatus?
        var priority: OperationPriority
        /// `placement` (bits 0-2), `mark` (bits 3-4), `removing` (bit 5).
        var bits: UInt8
        var lane: UInt32
        var retryCount: UInt32
        var attempts: UInt32
        var locator: Locator

        init(id: UUID, sequence: UInt64, createdAt: Int64, tag: String?, key: IndexedKey, dependsOn: UUID?,
             priority: OperationPriority, lane: UInt32, locator: Locator) {
            self.id = id
            self.sequence = sequence
            self.createdAt = createdAt
            lastAttemptAt = QueueIndex.none
            nextAttemptAt = QueueIndex.none
            extras = tag == nil && dependsOn == nil ? nil : Extras(tag: tag, lastError: nil, dependsOn: dependsOn)
            self.key = key
            status = nil
            self.priority = priority
            bits = 0
            self.lane = lane
            retryCount = 0
            attempts = 0
            self.locator = locator
        }

        /// Where it stands in the lane structures.
        var placement: Placement {
            get { Placement(rawValue: bits & 0b111) ?? .none }
            set { bits = bits & ~0b111 | newValue.rawValue }
        }

        /// Its next attempt's mark (see `MarkState`).
        var mark: MarkState {
            get { MarkState(rawValue: (bits >> 3) & 0b11) ?? .none }
            set { bits = bits & ~0b1_1000 | newValue.rawValue << 3 }
        }

        /// An admin removal of it is under way: it is in no lane structure but its lane's busy
        /// count, and nothing takes it (`beginRemoval`).
        var removing: Bool {
            get { bits & 0b10_0000 != 0 }
            set { bits = newValue ? bits | 0b10_0000 : bits & ~0b10_0000 }
        }

        /// An attempt of it started in this run of its retries (an admin retry clears it).
        var attempted: Bool { lastAttemptAt != QueueIndex.none }

        var tag: String? {
            get { extras?.tag }
            set { change { $0.tag = newValue } }
        }

        var lastError: String? {
            get { extras?.lastError }
            set { change { $0.lastError = newValue } }
        }

        var dependsOn: UUID? { extras?.dependsOn }

        /// Copy-on-write of the box (entries handed out share it), dropped when it is empty.
        private mutating func change(_ body: (inout Extras.Fields) -> Void) {
            var fields = extras?.fields ?? Extras.Fields()
            body(&fields)
            if fields.isEmpty {
                extras = nil
            } else if isKnownUniquelyReferenced(&extras) {
                extras?.fields = fields
            } else {
                extras = Extras(fields)
            }
        }
    }

    /// The optional fields of a record, boxed: see `Record`.
    final class Extras: @unchecked Sendable {
        struct Fields {
            var tag: String?
            var lastError: String?
            var dependsOn: UUID?
            var isEmpty: Bool { tag == nil && lastError == nil && dependsOn == nil }
        }

        /// Mutated only through `Record.change`, when the record holds the only reference:
        /// an index copy on another thread never sees the change.
        var fields: Fields

        init(_ fields: Fields) { self.fields = fields }
        convenience init(tag: String?, lastError: String?, dependsOn: UUID?) {
            self.init(Fields(tag: tag, lastError: lastError, dependsOn: dependsOn))
        }

        var tag: String? { fields.tag }
        var lastError: String? { fields.lastError }
        var dependsOn: UUID? { fields.dependsOn }
    }

    /// The four priority heaps of a lane and its heap of attempted operations, as stored
    /// fields: an array of them would cost each of up to a hundred thousand lanes an allocation.
    struct PriorityHeaps: Sendable {
        var low = LaneHeap(), normal = LaneHeap(), high = LaneHeap(), critical = LaneHeap()
        /// Pending operations attempted before: they go before any other, whatever the priority.
        var started = PositionedHeap<StartedSlot>()

        /// Runs `body` on the heap of `priority`, in place (no copy of its storage).
        mutating func with<Result>(_ priority: OperationPriority, _ body: (inout LaneHeap) -> Result) -> Result {
            switch priority {
            case .low: body(&low)
            case .normal: body(&normal)
            case .high: body(&high)
            case .critical: body(&critical)
            }
        }

        /// The lane's head: an attempted operation, else the oldest operation of the highest
        /// priority that has one.
        var head: Int32? { started.first?.record ?? critical.first ?? high.first ?? normal.first ?? low.first }

        var capacity: Int {
            low.slots.capacity + normal.slots.capacity + high.slots.capacity + critical.slots.capacity
                + started.members.capacity
        }
    }

    /// A pending operation in a lane's `started` heap: higher priority first, then creation order.
    struct StartedSlot: HeapMember {
        var record: Int32
        var rank: UInt8

        var slot: Int { Int(record) }

        static func < (lhs: Self, rhs: Self) -> Bool {
            lhs.rank != rhs.rank ? lhs.rank > rhs.rank : lhs.record < rhs.record
        }
    }

    /// Where the record saying that an operation's next attempt may start stands. Live only:
    /// recovery starts every operation at `none` (its marks count as attempts made).
    enum MarkState: UInt8, Sendable {
        /// No mark ahead of the next attempt: one is written when it is taken.
        case none
        /// Appended, not on disk yet; `attempts` already counts the attempt.
        case writing
        /// On disk; `attempts` counts the attempt, which has not started.
        case written
    }

    /// Where a lane is in its origin's schedule.
    enum Schedule: UInt8, Sendable {
        /// Busy (an attempt in flight), or nothing free to go.
        case none
        /// In the origin's ready heap, keyed by its turn.
        case ready
        /// In the origin's backoff heap, keyed by its head's `nextAttemptAt`.
        case backoff
    }

    /// One lane: an origin and an ordering key.
    struct Lane: Sendable {
        var origin: UInt32
        var orderingKey: String?
        var heaps = PriorityHeaps()
        var inFlight: Int32 = 0
        var schedule = Schedule.none
        /// Pending and in-progress operations: new writes to the lane queue behind them.
        var unfinished = 0
        /// Records of any status in the lane; a keyed lane is released when none is left.
        var members = 0
        /// Pending operations of the lane whose next attempt is marked ahead (`MarkState`).
        var marked: Int32 = 0
        /// How to end the attempt the lane has in flight (`take`): a removal of its operation
        /// cancels it. Kept here, not in a table by id: a lane has one attempt at a time, and
        /// the lookup costs nothing on the path of every delivery.
        var attempt: CallCancellation?

        init(origin: UInt32, orderingKey: String?) {
            self.origin = origin
            self.orderingKey = orderingKey
        }
    }

    /// A keyed lane's name, for finding its number.
    struct LaneName: Hashable, Sendable {
        var origin: UInt32
        var orderingKey: String
    }

    /// Per-origin state: counts, and the schedule of its lanes.
    struct OriginLanes: Sendable {
        var defaultLane: UInt32
        var counts = [Int](repeating: 0, count: OperationStatus.allCases.count)
        var unfinished: Int { counts[OperationStatus.pending.index] + counts[OperationStatus.inProgress.index] }
        /// Pending operations whose dependency ended failed or conflict.
        var doomed: Set<Int32> = []
        /// Lanes whose head may go now, by turn (lower = waiting longer).
        var ready = PositionedHeap<ScheduledLane>()
        /// Lanes whose head backs off, by the time it is due.
        var backoff = PositionedHeap<ScheduledLane>()
        /// Lanes with an attempt in flight.
        var active = 0

        init(defaultLane: UInt32) {
            self.defaultLane = defaultLane
        }
    }

    static var none: Int64 { .min }

    var records: [Record] = []
    /// Heap position of each record in its lane heap, -1 when not in one (parallel to `records`).
    var heapPositions: [Int32] = []
    var ids = SlotTable()
    var keys = SlotTable()
    var origins: [Origin] = []
    var originNumbers: [Origin: UInt32] = [:]
    /// The origin `intern` found last: most inserts (all of a recovery's, with one upstream) go
    /// to the origin of the one before, and comparing it costs less than hashing its host.
    var lastOrigin: UInt32?
    var originLanes: [OriginLanes] = []
    var lanes: [Lane] = []
    /// Keyed lanes by name (default lanes are found through `originLanes`).
    var laneNumbers: [LaneName: UInt32] = [:]
    /// Numbers of released lanes, for reuse.
    var freeLanes: [UInt32] = []
    /// Position of each lane in its origin's ready or backoff heap, -1 when in neither.
    var lanePositions: [Int32] = []
    /// The next turn handed to a lane joining a ready heap.
    var nextTurn: Int64 = 0
    /// Pending operations waiting for (or doomed by) each dependency slot.
    var dependents: [Int32: [Int32]] = [:]
    var statusCounts = [Int](repeating: 0, count: OperationStatus.allCases.count)
    var tombstones = 0
    var nextSequence: UInt64 = 1
    /// No record before this slot is unfinished.
    var oldestUnfinishedHint = 0
    /// Completed operations in completion order, for the retention sweep.
    var completions = CompletionQueue()
    /// Origins whose lane may have changed since `takeLanesToWake()` was last called.
    var lanesToWake: Set<UInt32> = []

    /// An empty index.
    public init() {}

    /// Operations indexed (tombstones excluded).
    public var count: Int { records.count - tombstones }

    /// Every origin that has had an operation, in first-seen order.
    public var knownOrigins: [Origin] { origins }

    /// Makes room for `count` operations at once (recovery knows about how many are coming):
    /// no step-by-step growth, so no copy of the records and no rehash of the tables on the way.
    /// Only on an empty index; later, the tables grow as they fill.
    public mutating func reserveCapacity(_ count: Int) {
        guard records.isEmpty, count > 0 else { return }
        // Before the first append touches the pages (see `HugePages`).
        reserveRecords(count)
        ids.rebuild(capacityFor: count, slots: [], hashOf: { _ in 0 })
        keys.rebuild(capacityFor: count, slots: [], hashOf: { _ in 0 })
    }

    /// Reserves the record storage for up to `count` operations on an empty index, touching
    /// none of it: its pages stay the kernel's zero pages until records land on them, so the
    /// reservation costs address space, not memory (the `Benchmarks/restart.sh` RSS does not
    /// move). Growing by doubling instead copied every record under the index lock: 64 MiB at
    /// the 2^19th operation, tens of milliseconds in which every event loop waited.
    public mutating func reserveRecords(_ count: Int) {
        guard records.isEmpty, count > records.capacity else { return }
        records.reserveCapacity(count)
        heapPositions.reserveCapacity(count)
        let bytes = records.capacity * MemoryLayout<Record>.stride
        records.withUnsafeMutableBufferPointer { HugePages.advise(UnsafeMutableRawPointer($0.baseAddress), byteCount: bytes) }
    }

    /// Adds an operation in `state`. Insert in creation order: the index numbers entries in
    /// insertion order and that order is FIFO (see the type's comment on dependencies).
    public mutating func insert(id: UUID, origin: Origin, idempotencyKey: String, priority: OperationPriority,
                                tag: String?, dependsOn: UUID?, createdAt: Int64, orderingKey: String? = nil,
                                state: OperationState, locator: Locator) throws(QueueIndexError) {
        try insert(Insertion(id: id, origin: origin, idempotencyKey: idempotencyKey, priority: priority, tag: tag,
                             dependsOn: dependsOn, createdAt: createdAt, orderingKey: orderingKey, state: state),
                   locator: locator)
    }

    /// Adds `operation` in `state` (default: its own; the fields the index does not keep are
    /// dropped).
    public mutating func insert(_ operation: OperationSnapshot, state: OperationState? = nil, locator: Locator) throws(QueueIndexError) {
        try insert(Insertion(operation, state: state ?? operation.state), locator: locator)
    }

    /// An operation made ready to insert away from the index, on any thread (recovery makes
    /// them on its reading threads): its key parsed and both table hashes computed, the fields
    /// the index does not keep dropped. Inserting it then only probes and stores. A million
    /// restored operations mostly hold no reference at all (a UUID key, no tag, no ordering
    /// key, no error, and no origin of their own: see `origin`).
    public struct Insertion: Sendable {
        public let id: UUID
        let idHash: Int
        let key: IndexedKey
        let keyHash: Int
        /// nil only in recovery: the origin of the operation restored before it (records of
        /// one origin come in runs, and not copying it saves a reference count per record).
        let origin: Origin?
        let priority: OperationPriority
        let tag: String?
        let dependsOn: UUID?
        let createdAt: Int64
        let orderingKey: String?
        let state: IndexedState

        private init(id: UUID, key: IndexedKey, origin: Origin?, priority: OperationPriority, tag: String?,
                     dependsOn: UUID?, createdAt: Int64, orderingKey: String?, state: IndexedState) {
            self.id = id
            idHash = QueueIndex.hash(id)
            self.key = key
            keyHash = key.tableHash
            self.origin = origin
            self.priority = priority
            self.tag = tag
            self.dependsOn = dependsOn
            self.createdAt = createdAt
            self.orderingKey = orderingKey
            self.state = state
        }

        /// The operation's fields, as for `insert(id:origin:...)`.
        public init(id: UUID, origin: Origin, idempotencyKey: String, priority: OperationPriority, tag: String?,
                    dependsOn: UUID?, createdAt: Int64, orderingKey: String?, state: OperationState) {
            self.init(id: id, key: IndexedKey(idempotencyKey), origin: origin, priority: priority, tag: tag,
                      dependsOn: dependsOn, createdAt: createdAt, orderingKey: orderingKey, state: IndexedState(state))
        }

        /// `operation` in `state`; `freshKey`, when given, is the UUID whose lowercase text is
        /// its key (one the proxy made up), taken as it is rather than parsed back from the text.
        public init(_ operation: OperationSnapshot, state: OperationState, freshKey: UUID? = nil) {
            self.init(id: operation.id, key: freshKey.map(IndexedKey.lowercaseUUID) ?? IndexedKey(operation.idempotencyKey),
                      origin: operation.origin, priority: operation.priority, tag: operation.tag,
                      dependsOn: operation.dependsOn, createdAt: operation.createdAt, orderingKey: operation.orderingKey,
                      state: IndexedState(state))
        }

        /// A `created` record's fields for `restore(_:locator:)`, the key as its UTF-8 bytes;
        /// `origin` nil: the one of the operation restored before.
        public init(id: UUID, idempotencyKey: UnsafeRawBufferPointer, origin: Origin?, priority: OperationPriority,
                    tag: String?, dependsOn: UUID?, createdAt: Int64, orderingKey: String?, state: IndexedState) {
            self.init(id: id, key: IndexedKey(utf8: idempotencyKey), origin: origin, priority: priority, tag: tag,
                      dependsOn: dependsOn, createdAt: createdAt, orderingKey: orderingKey, state: state)
        }
    }

    /// A state as the index keeps it: no stored responses, the error cut to `maxErrorLength`
    /// characters (done where the state is made: recovery makes a million on its reading threads).
    public struct IndexedState: Sendable {
        let status: OperationStatus
        let retryCount: UInt32
        let lastAttemptAt: Int64
        let nextAttemptAt: Int64
        let lastError: String?
        let attempts: UInt32

        public init(status: OperationStatus, retryCount: Int, lastAttemptAt: Int64?, nextAttemptAt: Int64?, lastError: String?,
                    attempts: Int = 0) {
            self.status = status
            self.retryCount = UInt32(clamping: retryCount)
            self.lastAttemptAt = lastAttemptAt ?? QueueIndex.none
            self.nextAttemptAt = nextAttemptAt ?? QueueIndex.none
            self.lastError = lastError.map { $0.count > QueueIndex.maxErrorLength ? String($0.prefix(QueueIndex.maxErrorLength)) : $0 }
            self.attempts = UInt32(clamping: attempts)
        }

        init(_ state: OperationState) {
            self.init(status: state.status, retryCount: state.retryCount, lastAttemptAt: state.lastAttemptAt,
                      nextAttemptAt: state.nextAttemptAt, lastError: state.lastError, attempts: state.attempts)
        }
    }

    /// Adds a prepared operation (see `insert(id:origin:...)` for the order to keep).
    public mutating func insert(_ insertion: Insertion, locator: Locator) throws(QueueIndexError) {
        guard let origin = insertion.origin else { throw .unknownOrigin(insertion.id) }
        let originNumber = intern(origin)
        let keyHash = Self.keyHash(insertion.keyHash, origin: originNumber)
        try checkNew(insertion.id, idHash: insertion.idHash, key: insertion.key, origin: originNumber, keyHash: keyHash)
        // The lane first, on its own: as an argument of `record`, its mutation of `self` while
        // `record` borrows it would make the compiler copy the whole index.
        let lane = lane(of: originNumber, orderingKey: insertion.orderingKey)
        let slot = append(record(insertion, lane: lane, locator: locator), idHash: insertion.idHash, keyHash: keyHash)
        apply(insertion.state, to: slot)
    }

    /// The record of `insertion`, in no lane structure and without a status yet.
    func record(_ insertion: Insertion, lane: UInt32, locator: Locator) -> Record {
        Record(id: insertion.id, sequence: nextSequence, createdAt: insertion.createdAt, tag: insertion.tag,
               key: insertion.key, dependsOn: insertion.dependsOn, priority: insertion.priority, lane: lane, locator: locator)
    }

    /// Throws when the id, or the key within the origin numbered `origin`, is indexed already.
    /// `keyHash` is the key's hash in the table (``keyHash(_:origin:)``).
    func checkNew(_ id: UUID, idHash: Int, key: IndexedKey, origin: UInt32, keyHash: Int) throws(QueueIndexError) {
        guard slot(of: id, hash: idHash) == nil else { throw .duplicateID(id) }
        guard slot(ofKey: key, origin: origin, hash: keyHash) == nil else { throw .duplicateKey(key.string) }
    }

    /// Appends a new record (in no lane structure yet) to the records, its lane and both
    /// tables, and returns its slot.
    mutating func append(_ record: consuming Record, idHash: Int, keyHash: Int) -> Int32 {
        lanes[Int(record.lane)].members += 1
        let slot = Int32(records.count)
        records.append(record)
        heapPositions.append(-1)
        nextSequence += 1
        // The hash closures capture `records` only: a method reference would capture a copy of
        // `self`, and with it the table being mutated, forcing a copy-on-write of every bucket.
        // Made only when a table grows or drains: the capture costs a retain and a release.
        if ids.isFull { ids.grow(hashOf: { [records] in Self.hash(records[Int($0)].id) }) }
        if keys.isFull { keys.grow(hashOf: { [records, lanes] in Self.keyHash(ofSlot: $0, records, lanes) }) }
        ids.insert(slot, hash: idHash)
        keys.insert(slot, hash: keyHash)
        if ids.isDraining { ids.drain(hashOf: { [records] in Self.hash(records[Int($0)].id) }) }
        if keys.isDraining { keys.drain(hashOf: { [records, lanes] in Self.keyHash(ofSlot: $0, records, lanes) }) }
        return slot
    }

    /// Records a new state for operation `id` (and a new locator, when the storage moved it).
    public mutating func update(_ id: UUID, state: OperationState, locator: Locator? = nil) throws(QueueIndexError) {
        guard update(id, state: state, relocate: { if let locator { $0 = locator } }) else { throw .unknownID(id) }
    }

    /// Records a new state for operation `id` and lets `relocate` change its locator in place,
    /// with one lookup and no `Entry` built (recovery applies every `updated` record this
    /// way). False when `id` is not indexed.
    @discardableResult
    public mutating func update(_ id: UUID, state: OperationState, relocate: (inout Locator) -> Void) -> Bool {
        guard let slot = slot(of: id) else { return false }
        relocate(&records[Int(slot)].locator)
        apply(IndexedState(state), to: slot)
        return true
    }

    /// Removes operation `id` and returns what the index had; operations waiting for it go on
    /// as if it had completed (see the type's comment).
    @discardableResult
    public mutating func remove(_ id: UUID) -> Entry? {
        guard let slot = slot(of: id) else { return nil }
        let removed = entry(at: slot)
        setStatus(nil, of: slot)
        forget(slot, hash: Self.hash(id))
        replaceDependents(of: slot)
        if tombstones > 1024, tombstones > count { compact() }
        return removed
    }

    /// Makes the record at `slot` (its status already nil) a tombstone: out of both tables,
    /// its strings dropped, one member less in its lane.
    mutating func forget(_ slot: Int32, hash: Int) {
        ids.remove(slot, hash: hash, hashOf: { [records] in Self.hash(records[Int($0)].id) })
        keys.remove(slot, hash: Self.keyHash(ofSlot: slot, records, lanes),
                    hashOf: { [records, lanes] in Self.keyHash(ofSlot: $0, records, lanes) })
        records[Int(slot)].tag = nil
        records[Int(slot)].lastError = nil
        records[Int(slot)].key = .text("")
        tombstones += 1
        release(lane: records[Int(slot)].lane)
    }

    /// The operation with this id.
    public func entry(_ id: UUID) -> Entry? {
        slot(of: id).map(entry(at:))
    }

    /// The operation of `origin` with this idempotency key (exact match). Keys are scoped to an
    /// origin (SPEC §4): the same key sent to another origin is another operation.
    public func entry(forKey key: String, origin: Origin) -> Entry? {
        guard let number = originNumbers[origin] else { return nil }
        let key = IndexedKey(key)
        return slot(ofKey: key, origin: number, hash: Self.keyHash(key.tableHash, origin: number)).map(entry(at:))
    }

    /// Operations with `status`, over all origins.
    public func count(of status: OperationStatus) -> Int {
        statusCounts[status.index]
    }

    /// Operations of `origin` with `status`.
    public func count(of status: OperationStatus, origin: Origin) -> Int {
        guard let number = originNumbers[origin] else { return 0 }
        return originLanes[Int(number)].counts[status.index]
    }

    /// True when `origin` has a pending or in-progress operation in any lane.
    public func hasQueued(origin: Origin) -> Bool {
        guard let number = originNumbers[origin] else { return false }
        return originLanes[Int(number)].unfinished > 0
    }

    /// True when the lane of `origin` and `orderingKey` (nil: the default lane) has a pending
    /// or in-progress operation: a new write to that lane must be queued behind them rather
    /// than forwarded, so nothing overtakes an older write. Other lanes do not matter.
    public func hasQueued(origin: Origin, orderingKey: String?) -> Bool {
        guard let number = laneNumber(origin: origin, orderingKey: orderingKey) else { return false }
        return lanes[Int(number)].unfinished > 0
    }

    /// Lanes of `origin` with an attempt in flight.
    public func activeLanes(origin: Origin) -> Int {
        guard let number = originNumbers[origin] else { return 0 }
        return originLanes[Int(number)].active
    }

    /// The origins whose lanes may have changed (new work, a dependency resolved, a finished
    /// attempt) since the last call; the replayer wakes those lanes.
    public mutating func takeLanesToWake() -> [Origin] {
        defer { lanesToWake.removeAll(keepingCapacity: true) }
        // One origin is the usual case (every stored request wakes its own): no sort for it.
        if lanesToWake.count == 1, let only = lanesToWake.first { return [origins[Int(only)]] }
        return lanesToWake.sorted().map { origins[Int($0)] }
    }

    // MARK: - Internals shared by the extensions

    func entry(at slot: Int32) -> Entry {
        let record = records[Int(slot)]
        let finished = record.status?.isFinished ?? true
        return Entry(
            id: record.id, origin: origins[Int(lanes[Int(record.lane)].origin)], idempotencyKey: record.key.string,
            status: record.status ?? .failed, priority: record.priority, sequence: record.sequence,
            createdAt: record.createdAt, retryCount: Int(record.retryCount), attempts: Int(record.attempts),
            lastAttemptAt: record.lastAttemptAt == Self.none ? nil : record.lastAttemptAt,
            nextAttemptAt: finished || record.nextAttemptAt == Self.none ? nil : record.nextAttemptAt,
            dependsOn: record.dependsOn, tag: record.tag, orderingKey: lanes[Int(record.lane)].orderingKey,
            lastError: record.lastError, locator: record.locator)
    }

    func slot(of id: UUID, hash: Int? = nil) -> Int32? {
        ids.find(hash: hash ?? Self.hash(id)) { records[Int($0)].id == id }
    }

    /// The slot holding `key` within the origin numbered `origin`; `hash` is ``keyHash(_:origin:)``.
    func slot(ofKey key: IndexedKey, origin: UInt32, hash: Int) -> Int32? {
        keys.find(hash: hash) { records[Int($0)].key == key && lanes[Int(records[Int($0)].lane)].origin == origin }
    }

    /// A key's hash in the key table: the key's own hash mixed with its origin's number, so that
    /// one key sent to many origins (clients choose both) spreads over the buckets instead of
    /// making one long probe sequence.
    static func keyHash(_ keyHash: Int, origin: UInt32) -> Int {
        var z = UInt64(origin) &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return keyHash ^ Int(truncatingIfNeeded: z ^ (z >> 31))
    }

    /// The key-table hash of the record at `slot`. Static, over the two arrays it reads: the
    /// tables' rehash closures capture those rather than `self` (see `append`).
    static func keyHash(ofSlot slot: Int32, _ records: [Record], _ lanes: [Lane]) -> Int {
        keyHash(records[Int(slot)].key.tableHash, origin: lanes[Int(records[Int(slot)].lane)].origin)
    }

    /// Version-4 UUIDs are random already; fold the two halves and mix so that ids that are
    /// not random (tests, other versions) still spread over the buckets.
    static func hash(_ id: UUID) -> Int {
        SlotTable.mix(id, seed: 0)
    }

    /// The number of the lane of `origin` and `orderingKey`, when it exists.
    func laneNumber(origin: Origin, orderingKey: String?) -> UInt32? {
        guard let number = originNumbers[origin] else { return nil }
        guard let orderingKey else { return originLanes[Int(number)].defaultLane }
        return laneNumbers[LaneName(origin: number, orderingKey: orderingKey)]
    }

    /// The number of `origin`, made when it is new (with its default lane).
    mutating func intern(_ origin: Origin) -> UInt32 {
        if let last = lastOrigin, origins[Int(last)] == origin { return last }
        if let known = originNumbers[origin] {
            lastOrigin = known
            return known
        }
        let originNumber = UInt32(origins.count)
        origins.append(origin)
        originNumbers[origin] = originNumber
        lastOrigin = originNumber
        originLanes.append(OriginLanes(defaultLane: newLane(origin: originNumber, orderingKey: nil)))
        return originNumber
    }

    /// The lane of origin number `originNumber` and `orderingKey`, made when it is new.
    mutating func lane(of originNumber: UInt32, orderingKey: String?) -> UInt32 {
        guard let orderingKey else { return originLanes[Int(originNumber)].defaultLane }
        let name = LaneName(origin: originNumber, orderingKey: orderingKey)
        if let lane = laneNumbers[name] { return lane }
        let lane = newLane(origin: originNumber, orderingKey: orderingKey)
        laneNumbers[name] = lane
        return lane
    }

    private mutating func newLane(origin: UInt32, orderingKey: String?) -> UInt32 {
        if let reused = freeLanes.popLast() {
            lanes[Int(reused)] = Lane(origin: origin, orderingKey: orderingKey)
            return reused
        }
        lanes.append(Lane(origin: origin, orderingKey: orderingKey))
        lanePositions.append(-1)
        return UInt32(lanes.count - 1)
    }

    /// Drops one member from `lane`; a keyed lane left with none is released, so a key used
    /// once costs nothing once its operations are gone. Default lanes stay.
    mutating func release(lane: UInt32) {
        lanes[Int(lane)].members -= 1
        guard lanes[Int(lane)].members == 0, let orderingKey = lanes[Int(lane)].orderingKey else { return }
        laneNumbers[LaneName(origin: lanes[Int(lane)].origin, orderingKey: orderingKey)] = nil
        lanes[Int(lane)].orderingKey = nil
        freeLanes.append(lane)
    }
}

extension OperationStatus {
    /// Position in `allCases`, for count arrays.
    var index: Int {
        switch self {
        case .pending: 0
        case .inProgress: 1
        case .completed: 2
        case .failed: 3
        case .conflict: 4
        }
    }
}

extension OperationPriority {
    /// Position in `allCases`, for the per-priority lane heaps.
    var index: Int { rawValue }
}

extension QueueIndex.Record {
    /// When a completed operation counts as completed for retention: its last attempt's start,
    /// or its creation when it has none.
    var completedAt: Int64 { lastAttemptAt == QueueIndex.none ? createdAt : lastAttemptAt }
}
