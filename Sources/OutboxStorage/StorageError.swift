/// Why a storage call failed. Typed so the queue can map each case once at its boundary
/// (`full` → `507`, the others → `500`).
public enum StorageError: Error, Sendable, Equatable {
    /// The disk is full (ENOSPC, EDQUOT): nothing of the failed batch was kept, earlier records are intact.
    case full
    /// A system call failed; the text names the call, the file and `strerror`.
    case io(String)
    /// Bytes on disk are not a valid record where one was expected.
    case corrupt(String)
    /// The location is from before a compaction rewrote or removed its segment: the record, if
    /// still needed, lives on at the location the compaction returned. Asking the index again
    /// (once it took the compaction's answer) finds it.
    case stale(String)
    /// The log was closed (or failed for good after an unrecoverable `fdatasync` error).
    case closed
}
