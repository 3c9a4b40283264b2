import Foundation
import OutboxModel

extension QueueIndex {
    /// Which operations a listing returns; nil fields match everything.
    public struct Filter: Sendable, Equatable {
        /// Only this status.
        public var status: OperationStatus?
        /// Only this exact tag.
        public var tag: String?
        /// Only this origin.
        public var origin: Origin?
        /// Only this exact ordering key (the lane of that key, in every origin unless `origin`
        /// is given too).
        public var orderingKey: String?

        /// A filter on the given fields.
        public init(status: OperationStatus? = nil, tag: String? = nil, origin: Origin? = nil, orderingKey: String? = nil) {
            self.status = status
            self.tag = tag
            self.origin = origin
            self.orderingKey = orderingKey
        }
    }

    /// One page of a listing.
    public struct Page: Sendable {
        /// The operations, in queue order.
        public var entries: [Entry]
        /// Pass as `afterSequence` for the next page; nil when nothing more matches.
        public var next: UInt64?
    }

    /// Operations matching `filter`, in queue order (creation order, the order `sequence`
    /// gives), starting after the one whose sequence is `afterSequence`. The cursor is a
    /// sequence rather than an id so paging stays stable when the last id seen is removed
    /// meanwhile. A page is at most `limit` (≥ 1) long. Cost: a binary search, then a scan that
    /// stops one match past the page, so a very selective filter may scan far.
    public func list(_ filter: Filter = Filter(), afterSequence: UInt64? = nil, limit: Int) -> Page {
        let limit = max(1, limit)
        var start = 0
        if let afterSequence {
            // Records are in sequence order (tombstones included), so binary search.
            var low = 0, high = records.count
            while low < high {
                let middle = (low + high) / 2
                if records[middle].sequence <= afterSequence { low = middle + 1 } else { high = middle }
            }
            start = low
        }
        let originNumber = filter.origin.map { originNumbers[$0] }
        if case .some(.none) = originNumber { return Page(entries: [], next: nil) }
        // The key's lanes, one per origin that has it: records are matched by lane number.
        var keyLanes: Set<UInt32>?
        if let orderingKey = filter.orderingKey {
            var candidates = Array(0..<UInt32(origins.count))
            if case .some(.some(let number)) = originNumber { candidates = [number] }
            keyLanes = Set(candidates.compactMap { laneNumbers[LaneName(origin: $0, orderingKey: orderingKey)] })
            if keyLanes?.isEmpty == true { return Page(entries: [], next: nil) }
        }
        var entries: [Entry] = []
        for index in start..<records.count {
            let record = records[index]
            guard let status = record.status,
                  filter.status.map({ $0 == status }) ?? true,
                  filter.tag.map({ $0 == record.tag }) ?? true,
                  originNumber.map({ $0 == lanes[Int(record.lane)].origin }) ?? true,
                  keyLanes.map({ $0.contains(record.lane) }) ?? true else { continue }
            if entries.count == limit { return Page(entries: entries, next: entries.last?.sequence) }
            entries.append(entry(at: Int32(index)))
        }
        return Page(entries: entries, next: nil)
    }

    /// Like `list(_:afterSequence:limit:)`, with the cursor given as the id of the last
    /// operation seen (the admin API's `after` cursor); nil when that id is not indexed.
    public func list(_ filter: Filter = Filter(), after id: UUID, limit: Int) -> Page? {
        guard let slot = slot(of: id) else { return nil }
        return list(filter, afterSequence: records[Int(slot)].sequence, limit: limit)
    }

    /// Creation time (ms since the epoch) of the oldest pending or in-progress operation, for
    /// `oldestPendingAgeSeconds`; nil when there is none.
    public var oldestUnfinishedCreatedAt: Int64? {
        // The hint is the oldest unfinished record in creation order; with a clock that never
        // went back that is also the smallest createdAt.
        oldestUnfinishedHint < records.count ? records[oldestUnfinishedHint].createdAt : nil
    }

    /// Pending or in-progress operations created more than `ttlSeconds` before `now`: the
    /// caller fails them as "expired" (`ReplayTransition.expire`). Walks the unfinished
    /// operations in creation order and stops at the first one that is not expired, so a
    /// sweep costs what it finds, not the size of the queue. (Were the clock set back, an
    /// operation created after that moment expires once the one before it does.)
    public func expired(now: Int64, ttlSeconds: Double) -> [UUID] {
        let cutoff = QueueRules.expiryCutoff(now: now, ttlSeconds: ttlSeconds)
        var found: [UUID] = []
        for index in oldestUnfinishedHint..<records.count {
            guard let status = records[index].status, !status.isFinished else { continue }
            guard records[index].createdAt < cutoff else { break }
            found.append(records[index].id)
        }
        return found
    }

    /// Completed operations whose last attempt (or, lacking one, creation) is more than
    /// `retentionSeconds` before `now`, in creation order: the caller removes them. Looks only
    /// at the completions that are due (see `CompletionQueue`).
    public mutating func retentionExpired(now: Int64, retentionSeconds: Double) -> [UUID] {
        let cutoff = QueueRules.retentionCutoff(now: now, retentionSeconds: retentionSeconds)
        var slots: [Int32] = []
        let records = self.records
        completions.sweep(before: cutoff, isCurrent: { slot, completedAt in
            records[Int(slot)].status == .completed && records[Int(slot)].completedAt == completedAt
        }, visit: { slots.append($0) })
        return slots.sorted().map { records[Int($0)].id }
    }
}

extension QueueIndex {
    /// Bytes the index holds, counted from its arrays' capacities, the records' `Extras` boxes
    /// and the out-of-line storage of strings too long to be stored inline (over 15 UTF-8
    /// bytes; ~32 bytes of header each). An estimate for reports and tests, independent of
    /// allocator behaviour. The records and their heap positions count as far as they are
    /// filled: the rest of their reservation is never touched (see `reserveRecords`).
    public var footprintBytes: Int {
        func outOfLine(_ text: String?) -> Int {
            guard let text, text.utf8.count > 15 else { return 0 }
            return text.utf8.count + 32
        }
        var bytes = records.count * MemoryLayout<Record>.stride + heapPositions.count * 4
        bytes += ids.footprint + keys.footprint + completions.footprintBytes
        bytes += lanes.capacity * MemoryLayout<Lane>.stride + lanePositions.capacity * 4
        bytes += laneNumbers.capacity * (MemoryLayout<LaneName>.stride + 4) + freeLanes.capacity * 4
        for lane in lanes {
            bytes += lane.heaps.capacity * 4 + outOfLine(lane.orderingKey)
        }
        for origin in originLanes {
            bytes += origin.doomed.capacity * 8 + (origin.ready.members.capacity + origin.backoff.members.capacity) * 16
        }
        for record in records {
            // A boxed object: 16 bytes of object header before its fields.
            if record.extras != nil { bytes += 16 + MemoryLayout<Extras.Fields>.stride }
            bytes += outOfLine(record.tag) + outOfLine(record.lastError)
            if case .text(let key) = record.key { bytes += outOfLine(key) }
        }
        return bytes
    }
}
