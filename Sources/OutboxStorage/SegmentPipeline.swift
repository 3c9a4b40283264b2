import Dispatch
import Foundation

/// Reads segments on Dispatch worker threads while the calling thread consumes what they
/// decoded, strictly in segment order: the consumer sees exactly the sequence a serial scan
/// of one segment after another would give, so the index it builds is the same.
///
/// Each worker takes the next segment (never more than `window` segments ahead of the one
/// being consumed) and hands its items over in chunks of `chunkSize`, at most `maxChunks`
/// waiting per segment: memory in flight stays `window` segments' items however long the log
/// is. The default holds about a whole 64 MiB segment of small records, because a worker that
/// stops early waits for the consumer, and then only one worker reads at a time (measured on a
/// million operations: with 2 chunks the readers took turns and restart took 3.1 s, with 64
/// they overlap and it took 1.9 s, for about 8 MB more memory while restarting). The
/// workers are Dispatch threads, not the cooperative pool, because they block on `pread`.
/// One condition variable guards all shared state (a few hundred hand-overs per million
/// records, so the lock is never contended for long).
final class SegmentPipeline<Item: Sendable, Outcome: Sendable>: @unchecked Sendable {
    /// What a worker does with one segment: reads it, calling `emit` with every item in order,
    /// and returns its outcome (or throws, which stops the whole pipeline).
    typealias Work = @Sendable (_ segment: Int, _ emit: (consuming Item) -> Void) throws(StorageError) -> Outcome

    private struct Feed {
        var chunks: [[Item]] = []
        var outcome: Result<Outcome, StorageError>?
    }

    private let condition = NSCondition()
    // Everything below is read and written only while holding `condition`.
    private var feeds: [Feed]
    private var nextClaim = 0
    private var consumed = 0
    private var running = 0
    private var cancelled = false

    private let count: Int
    private let window: Int
    private let chunkSize: Int
    private let maxChunks: Int

    private init(count: Int, window: Int, chunkSize: Int, maxChunks: Int) {
        self.count = count
        self.window = max(1, window)
        self.chunkSize = max(1, chunkSize)
        self.maxChunks = max(1, maxChunks)
        feeds = Array(repeating: Feed(), count: count)
    }

    /// Runs `work` for segments `0..<count` on up to `workers` threads and calls `consume`
    /// with every item, then `finish` with every outcome, in segment order, on this thread.
    /// The first error (in segment order) is thrown once every worker has stopped.
    static func run(count: Int, workers: Int, chunkSize: Int = 1024, maxChunks: Int = 64,
                    work: @escaping Work, consume: (Item) -> Void,
                    finish: (Outcome) throws(StorageError) -> Void) throws(StorageError) {
        guard count > 0 else { return }
        let threads = max(1, min(workers, count))
        let pipeline = SegmentPipeline(count: count, window: threads, chunkSize: chunkSize, maxChunks: maxChunks)
        pipeline.running = threads
        for _ in 0..<threads {
            DispatchQueue.global(qos: .userInitiated).async { pipeline.workLoop(work) }
        }
        try pipeline.consumeAll(consume: consume, finish: finish)
    }

    private func workLoop(_ work: Work) {
        while let segment = claim() {
            var chunk: [Item] = []
            chunk.reserveCapacity(chunkSize)
            let outcome: Result<Outcome, StorageError>
            do throws(StorageError) {
                outcome = .success(try work(segment) { item in
                    chunk.append(item)
                    if chunk.count == chunkSize {
                        hand(chunk, of: segment)
                        chunk = []
                        chunk.reserveCapacity(chunkSize)
                    }
                })
            } catch {
                outcome = .failure(error)
            }
            if !chunk.isEmpty { hand(chunk, of: segment) }
            condition.lock()
            feeds[segment].outcome = outcome
            condition.broadcast()
            condition.unlock()
        }
        condition.lock()
        running -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// The next segment to read, once it is within the window; nil when none is left.
    private func claim() -> Int? {
        condition.lock()
        defer { condition.unlock() }
        while !cancelled, nextClaim < count {
            if nextClaim < consumed + window {
                nextClaim += 1
                return nextClaim - 1
            }
            condition.wait()
        }
        return nil
    }

    /// Queues a chunk for the consumer, waiting while the segment already has `maxChunks`
    /// waiting. After a cancel the chunk is dropped: nobody will consume it.
    private func hand(_ chunk: [Item], of segment: Int) {
        condition.lock()
        defer { condition.unlock() }
        while !cancelled, feeds[segment].chunks.count >= maxChunks { condition.wait() }
        guard !cancelled else { return }
        feeds[segment].chunks.append(chunk)
        condition.broadcast()
    }

    private func consumeAll(consume: (Item) -> Void, finish: (Outcome) throws(StorageError) -> Void) throws(StorageError) {
        for segment in 0..<count {
            while true {
                condition.lock()
                while feeds[segment].chunks.isEmpty, feeds[segment].outcome == nil { condition.wait() }
                if !feeds[segment].chunks.isEmpty {
                    let chunk = feeds[segment].chunks.removeFirst()
                    condition.broadcast()
                    condition.unlock()
                    // Through the buffer, not `for in` or the array's subscript: both hand out
                    // a copy of every item (and destroy it after).
                    chunk.withUnsafeBufferPointer { items in
                        for index in items.indices { consume(items[index]) }
                    }
                    continue
                }
                // The outcome is set after the last chunk was handed over: nothing is left.
                let outcome = feeds[segment].outcome
                feeds[segment] = Feed()
                condition.unlock()
                do throws(StorageError) {
                    guard let outcome else { break }
                    try finish(outcome.get())
                } catch {
                    stop()
                    throw error
                }
                condition.lock()
                consumed += 1
                condition.broadcast()
                condition.unlock()
                break
            }
        }
        stop()
    }

    /// Cancels what is left and waits until no worker runs: none touches a file after return.
    private func stop() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }
}
