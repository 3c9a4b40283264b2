import Foundation
import OutboxHTTP
import OutboxModel

/// What the admin API reads from the queue. The queue implements it; the admin code never
/// touches storage files (STYLE: Admin → Queue, never → Storage).
///
/// Reads of the queue's contents are `async`: the local store answers them from memory and
/// its log at once, the PostgreSQL store from its database on a thread of its own, so an admin
/// request never holds a cooperative thread while a statement runs. What is each instance's own
/// (connectivity, origins' reachability) stays synchronous.
package protocol AdminQueueSource: Sendable {
    var connectivityMode: String { get }
    var counts: [OperationStatus: Int] { get async }
    /// Seconds since the oldest not-finished operation was queued; nil when none is.
    var oldestPendingAgeSeconds: Double? { get async }
    var origins: [OriginStatus] { get }
    /// Pending and in-progress operations of one origin.
    func unfinishedCount(origin: Origin) async -> Int
    /// Lanes of one origin with an attempt in flight.
    func activeLanes(origin: Origin) async -> Int
    /// Queue order (creation order), filtered, after the cursor id, at most `limit`.
    func list(status: OperationStatus?, tag: String?, origin: String?, orderingKey: String?, after: UUID?,
              limit: Int) async -> (items: [OperationSnapshot], next: UUID?)
    /// One operation for its view: its stored request checked piece by piece, the body's bytes
    /// passing through `visitBody` in order, and the body itself left where it is stored to be
    /// read again by offset. Nil when unknown or unreadable.
    func view(_ id: UUID, visitingBody visitBody: (UnsafeRawBufferPointer) -> Void) async -> OperationView?
    /// Waits until nothing is pending or in progress, at most `timeoutSeconds`.
    func waitUntilDrained(timeoutSeconds: Double) async -> Bool
    var maxRetries: Int { get }
    /// failed / conflict / pending → pending now with retryCount 0; nil when unknown, the
    /// current status when it cannot be retried (completed, in progress).
    func retry(_ id: UUID) async -> Result<OperationSnapshot, AdminRefusal>
    /// Removes one operation; false when unknown.
    func delete(_ id: UUID) async -> Bool
    /// Removes every operation with `status` (all when nil); returns how many.
    func deleteAll(status: OperationStatus?) async -> Int
    /// Removes operations created before `cutoff` (ms since the epoch); returns how many.
    func prune(createdBefore cutoff: Int64) async -> Int
    /// Every lane tries now, ignoring backoff; returns once the cleared schedules are stored.
    func flush() async
    /// `offline`: forward nothing, queue every queueable request, replay nothing.
    func setForcedOffline(_ offline: Bool)
    /// Bytes the queue takes on disk (the local log; 0 where a database holds it).
    var storageBytes: Int { get async }
    /// Records the last recovery found damaged and skipped (their bytes are kept in `damaged/`).
    var storageDamagedRecords: Int { get async }
    /// Where the queue lives and whether it answers (`store` in `/admin/status`, SPEC §9).
    var store: StoreStatus { get async }
    /// Why the store cannot be asked now (its database is away), nil when it can: the admin
    /// API answers `503 store_unavailable` then, never a `404` for what it could not read.
    var unavailable: String? { get }
}

extension AdminQueueSource {
    /// A store in this process's own files is always there to ask.
    package var unavailable: String? { nil }
}

/// The store behind the queue as `/admin/status` shows it (SPEC §9): its kind, whether it
/// answers now, its last error (never a secret: host, port and database at most), and the name
/// of this instance.
package struct StoreStatus: Sendable, Equatable {
    package var kind: String
    package var reachable: Bool
    package var lastError: String?
    package var instance: String

    package init(kind: String, reachable: Bool, lastError: String?, instance: String) {
        self.kind = kind
        self.reachable = reachable
        self.lastError = lastError
        self.instance = instance
    }
}

/// An operation as its admin view shows it: the snapshot (with the response and conflict it
/// keeps), the stored request's headers, and its body as bytes in the log, which the view
/// streams instead of holding (SPEC §6).
package struct OperationView: Sendable {
    package var snapshot: OperationSnapshot
    package var headers: HTTPHeaders
    package var body: any ByteSource

    package init(snapshot: OperationSnapshot, headers: HTTPHeaders, body: any ByteSource) {
        self.snapshot = snapshot
        self.headers = headers
        self.body = body
    }
}

/// Why an admin write was refused.
package enum AdminRefusal: Error, Sendable {
    case notFound
    case notRetryable(OperationStatus)
}
