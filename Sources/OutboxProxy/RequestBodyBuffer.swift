import OutboxModel

/// The request body an exchange keeps: a queueable request's whole body (it may still have to
/// be stored, and the forward sends it from here), the bytes that came before the upstream
/// call existed, or the copy that lets a request be sent again on a fresh connection.
///
/// The bytes stay in memory while the process-wide ``BodyMemoryBudget`` can spare them, and
/// move to a ``SpillFile`` in `dataDirectory` the moment it cannot: the bytes so far are
/// written out, their memory and budget given back, and the rest of the body is appended to
/// the file (nginx's `client_body_buffer_size` and `client_body_temp_path`, with one budget
/// for the whole process instead of one buffer per request). The memory held is charged by
/// capacity, not count, and grows by doubling within what the body announced
/// (`Content-Length`), so the charge is the memory.
///
/// A value owned by one exchange on its loop; ``release(to:recycle:)`` must end every body
/// that took budget (every way an exchange ends calls it).
struct RequestBodyBuffer {
    /// The bytes, while in memory; empty once spilled.
    private(set) var memory: [UInt8]
    /// The file holding every byte once the body outgrew the budget.
    private(set) var spill: SpillFile?
    /// Body bytes kept, wherever they are.
    private(set) var count = 0
    /// Budget taken for `memory` (at least its capacity once anything is kept).
    private(set) var reserved = 0
    /// The length a body kept whole announced (`Content-Length`): reserved in one step.
    private var expected: Int?

    /// Smallest memory step: one socket read's worth.
    private static let minimumStep = 16 * 1024

    /// `memory`: an empty buffer to fill (a loop's spare one, whose capacity is charged too).
    init(memory: [UInt8] = []) {
        self.memory = memory
    }

    /// The whole body will be kept and announced `length` bytes: memory for all of them is
    /// reserved at the first byte (one allocation, no copies as it grows), or, when the
    /// budget cannot spare that much, the body goes to a spill file from its first byte.
    mutating func keepWhole(expectedLength length: Int?) {
        expected = length
    }

    var isEmpty: Bool { count == 0 }
    var isSpilled: Bool { spill != nil }

    /// Keeps `bytes` after those kept so far: in memory when the budget allows, else in the
    /// spill file (made in `directory` on first need). A failure to write the file is returned
    /// and the body is then incomplete: the exchange must answer an error.
    mutating func append(_ bytes: UnsafeRawBufferPointer, lease: BodyMemoryBudget.Lease,
                         directory: String) -> SpillFile.Failure? {
        guard !bytes.isEmpty else { return nil }
        if spill == nil, !reserveMemory(for: bytes.count, lease: lease) {
            if let failure = moveToSpillFile(in: directory, lease: lease) { return failure }
        }
        if let spill {
            if let failure = spill.write(bytes, at: count) { return failure }
        } else {
            memory.append(contentsOf: bytes)
        }
        count += bytes.count
        return nil
    }

    /// Keeps `bytes` in memory only if the budget allows it without a spill file; returns
    /// whether it did. For a copy that is merely useful (the resend copy of a forward).
    mutating func appendIfAffordable(_ bytes: UnsafeRawBufferPointer, lease: BodyMemoryBudget.Lease) -> Bool {
        guard !bytes.isEmpty else { return true }
        guard spill == nil, reserveMemory(for: bytes.count, lease: lease) else { return false }
        memory.append(contentsOf: bytes)
        count += bytes.count
        return true
    }

    /// Grows the reservation (and the memory's capacity) so that `more` bytes fit; false when
    /// the budget cannot spare even the exact amount.
    private mutating func reserveMemory(for more: Int, lease: BodyMemoryBudget.Lease) -> Bool {
        let needed = count + more
        guard needed > reserved else { return true }
        // A recycled buffer's capacity is memory held all the same.
        let least = max(needed, memory.capacity)
        if let expected {
            // All that was announced at once, or nothing: a body that will not fit in memory
            // whole is better in the file from its first byte than copied there half-way.
            guard lease.take(max(least, expected) - reserved) else { return false }
            reserved = max(least, expected)
        } else if lease.take(max(least, reserved * 2, Self.minimumStep) - reserved) {
            // Doubling, so a body arriving in reads reserves (and moves) O(log n) times.
            reserved = max(least, reserved * 2, Self.minimumStep)
        } else if lease.take(least - reserved) {
            reserved = least
        } else {
            return false
        }
        if memory.capacity < reserved {
            memory.reserveCapacity(reserved)
            // The allocator may round up: what it gave is charged too, when the budget allows.
            if memory.capacity > reserved, lease.take(memory.capacity - reserved) { reserved = memory.capacity }
        }
        return true
    }

    /// Writes what is in memory to a new spill file and gives the memory and its budget back.
    private mutating func moveToSpillFile(in directory: String, lease: BodyMemoryBudget.Lease) -> SpillFile.Failure? {
        let file: SpillFile
        switch SpillFile.create(in: directory) {
        case .success(let created): file = created
        case .failure(let failure): return failure
        }
        if let failure = memory.withUnsafeBytes({ file.write($0, at: 0) }) { return failure }
        spill = file
        memory = []
        lease.give(reserved)
        reserved = 0
        return nil
    }

    /// Calls `body` with the kept bytes from `offset` on, at most `limit` of them, and returns
    /// how many it passed: from memory directly, from the spill file through `scratch`.
    func read(from offset: Int, atMost limit: Int, scratch: inout [UInt8],
                       _ body: (UnsafeRawBufferPointer) -> Void) -> Result<Int, SpillFile.Failure> {
        let length = min(limit, count - offset)
        guard length > 0 else { return .success(0) }
        guard let spill else {
            memory.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + length)])) }
            return .success(length)
        }
        if scratch.count < length { scratch = [UInt8](repeating: 0, count: length) }
        let failure = scratch.withUnsafeMutableBytes { raw in
            spill.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<length]), at: offset)
        }
        if let failure { return .failure(failure) }
        scratch.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        return .success(length)
    }

    /// SHA-256 of method, target and the body (`IdempotencyKey.fingerprint`), the body read
    /// from the spill file in pieces when it is there.
    func fingerprint(method: String, target: String, scratch: inout [UInt8]) -> Result<[UInt8], SpillFile.Failure> {
        guard spill != nil else {
            return .success(IdempotencyKey.fingerprint(method: method, target: target, body: memory))
        }
        var hash = IdempotencyKey.fingerprintHasher(method: method, target: target)
        var offset = 0
        while offset < count {
            switch read(from: offset, atMost: Self.filePiece, scratch: &scratch, { hash.update($0) }) {
            case .success(let length): offset += length
            case .failure(let failure): return .failure(failure)
            }
        }
        return .success(hash.finalize())
    }

    /// The body as an operation holds it: its bytes, or (spilled) none and the file.
    var operationBody: (bytes: [UInt8], spilled: SpilledBody?) {
        spill.map { ([], SpilledBody(file: $0, count: count)) } ?? (memory, nil)
    }

    /// The whole body in one array, read back from the spill file if need be: only for a
    /// reader that cannot take pieces (the admin API's JSON).
    var wholeBytes: Result<[UInt8], SpillFile.Failure> {
        guard let spill else { return .success(memory) }
        return SpilledBody(file: spill, count: count).bytes()
    }

    /// Lets go of every byte: the budget goes back to `lease`, the memory to `recycle` (a
    /// loop's spare buffers), the spill file (already unlinked) closes with its last holder.
    mutating func release(to lease: BodyMemoryBudget.Lease, recycle: (inout [UInt8]) -> Void) {
        lease.give(reserved)
        reserved = 0
        recycle(&memory)
        memory = []
        spill = nil
        count = 0
    }

    /// Spill files are read in pieces this large (a loop's scratch buffer).
    static let filePiece = 64 * 1024
}
