import Foundation
import OutboxHTTP
import OutboxModel

/// What the admin API reads from the queue. The queue implements it; the admin code never
/// touches storage files (STYLE: Admin → Queue, never → Storage).
package protocol AdminQueueSource: Sendable {
    var connectivityMode: String { get }
    var counts: [OperationStatus: Int] { get }
    /// Seconds since the oldest not-finished operation was queued; nil when none is.
    var oldestPendingAgeSeconds: Double? { get }
    var origins: [OriginStatus] { get }
    /// Pending and in-progress operations of one origin.
    func unfinishedCount(origin: Origin) -> Int
    /// Lanes of one origin with an attempt in flight.
    func activeLanes(origin: Origin) -> Int
    /// Queue order (creation order), filtered, after the cursor id, at most `limit`.
    func list(status: OperationStatus?, tag: String?, origin: String?, orderingKey: String?, after: UUID?,
              limit: Int) -> (items: [OperationSnapshot], next: UUID?)
    /// One operation for its view: its stored request checked on disk piece by piece, the
    /// body's bytes passing through `visitBody` in order, and the body itself left on disk to
    /// be read again by offset. Nil when unknown or unreadable.
    func view(_ id: UUID, visitingBody visitBody: (UnsafeRawBufferPointer) -> Void) -> OperationView?
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
    /// Bytes of the log on disk.
    var storageBytes: Int { get }
    /// Records the last recovery found damaged and skipped (their bytes are kept in `damaged/`).
    var storageDamagedRecords: Int { get }
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
