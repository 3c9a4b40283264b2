import CSystem
import Foundation
@testable import OutboxModel
@testable import OutboxStorage
import Testing

@Suite struct StorageRecordTests {
    @Test func crc32cMatchesTheCastagnoliCheckValue_InBothImplementations() {
        let check = Array("123456789".utf8)
        check.withUnsafeBytes { raw in
            #expect(csystem_crc32c(0, raw.baseAddress, raw.count) == 0xE306_9283)
            #expect(csystem_crc32c_portable(0, raw.baseAddress, raw.count) == 0xE306_9283)
        }
    }

    @Test func hardwareAndPortableCRCAgree_AtEveryLengthAndAlignment() {
        let bytes = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }
        bytes.withUnsafeBytes { raw in
            for start in 0..<9 {
                for length in stride(from: 0, to: raw.count - start, by: 37) {
                    let base = raw.baseAddress.map { $0 + start }
                    #expect(csystem_crc32c(0, base, length) == csystem_crc32c_portable(0, base, length))
                }
            }
            // A checksum computed in two pieces equals the one over the whole.
            let whole = csystem_crc32c(0, raw.baseAddress, raw.count)
            let first = csystem_crc32c(0, raw.baseAddress, 123)
            #expect(csystem_crc32c(first, raw.baseAddress.map { $0 + 123 }, raw.count - 123) == whole)
        }
    }

    /// Records of a kilobyte and more are checksummed in blocks of three interleaved streams:
    /// every length around those blocks' edges, one and several rounds, agrees with the table.
    @Test func hardwareAndPortableCRCAgree_OverLengthsOfSeveralInterleavedBlocks() {
        let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) }
        bytes.withUnsafeBytes { raw in
            var lengths = Array(stride(from: 0, through: raw.count - 3, by: 97))
            for round in 1...4 { lengths += (-9...9).map { round * 384 + $0 } }
            for start in [0, 1, 3] {
                for length in lengths {
                    let base = raw.baseAddress.map { $0 + start }
                    #expect(csystem_crc32c(0, base, length) == csystem_crc32c_portable(0, base, length), "length \(length) at \(start)")
                }
            }
            #expect(csystem_crc32c(0xDEAD_BEEF, raw.baseAddress, 4000) == csystem_crc32c_portable(0xDEAD_BEEF, raw.baseAddress, 4000))
        }
    }

    @Test func everyRecordTypeRoundTripsThroughTheLog_AndRecoveryKeepsTheLatestState() async throws {
        let directory = try StorageTestDirectory()
        let (log, recovered) = try StorageSamples.open(directory)
        #expect(recovered.isEmpty)
        var request = StorageSamples.request(1, bodySize: 3000)
        request.tag = "batch-7"
        request.orderingKey = "customer-42"
        request.credentials = (0..<32).map { UInt8($0 * 5) }
        request.dependsOn = UUID()
        request.priority = .critical
        request.headers.add("X-Dup", "a")
        request.headers.add("X-Dup", "b")
        let response = StoredResponse(status: 201, headers: [("Content-Type", "text/plain"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")],
                                      body: Array("créé".utf8) + [0, 255, 10])
        let conflict = StoredResponse(status: 409, headers: ["X": "y"], body: Array("{\"conflict\":true}".utf8))
        let completed = OperationState(status: .completed, retryCount: 3, lastAttemptAt: 5, nextAttemptAt: 9,
                                       lastError: "upstream said 503", response: response, conflict: nil)
        let conflicted = OperationState(status: .conflict, retryCount: 1, lastAttemptAt: 6, conflict: conflict)
        let other = StorageSamples.request(2)
        let doomed = StorageSamples.request(3)

        let createdAt = try await log.append(.created(request, OperationState()))
        let completedAt = try await log.append(.updated(request.id, completed))
        let otherAt = try await log.append(.created(other, OperationState(status: .inProgress, lastAttemptAt: 1)))
        let conflictAt = try await log.append(.updated(other.id, conflicted))
        _ = try await log.append(.created(doomed, OperationState()))
        let deletedAt = try await log.append(.deleted(doomed.id))

        #expect(try log.readRequest(at: createdAt) == request)
        #expect(try log.readState(at: createdAt) == OperationState())
        #expect(try log.readState(at: completedAt) == completed)
        #expect(try log.readState(at: conflictAt) == conflicted)
        #expect(try log.readRecord(at: deletedAt) == .deleted(doomed.id))
        #expect(throws: StorageError.self) { try log.readRequest(at: completedAt) }
        log.close()

        let (reopened, again) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(again.map(\.operation.id) == [request.id, other.id])
        let first = try #require(again.first)
        // Bodies stay on disk: the recovered state says what it is, the location has the rest.
        var light = completed
        light.response = nil
        // The credential digest stays in the record too: only a repeated key reads it.
        var summary = OperationSnapshot(request, state: light)
        summary.credentials = []
        #expect(first.operation == summary)
        #expect(first.createdAt == createdAt)
        #expect(first.stateAt == completedAt)
        #expect(try reopened.readState(at: completedAt) == completed)
        #expect(try reopened.readRequest(at: first.createdAt) == request)
        #expect(again.last?.operation.state.status == .conflict)
        #expect(again.last?.stateAt == conflictAt)
        #expect(again.last?.createdAt == otherAt)
    }

    /// A `created` payload laid out by hand as the version before ordering keys wrote it (flags
    /// bit 4 did not exist): it still decodes, in full and as recovery's summary, in the
    /// default lane.
    @Test func createdRecordWithoutAnOrderingKey_AsOlderVersionsWroteIt_DecodesWithOrderingKeyNil() throws {
        var payload: [UInt8] = []
        func u16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { payload += $0 } }
        func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { payload += $0 } }
        func i64(_ value: Int64) { withUnsafeBytes(of: value.littleEndian) { payload += $0 } }
        func string(_ text: String) { u32(UInt32(text.utf8.count)); payload += Array(text.utf8) }
        let id = UUID()
        withUnsafeBytes(of: id.uuid) { payload += $0 }
        i64(1_700_000_000_000)
        payload.append(2)  // priority high
        payload.append(1)  // flags: tag only
        payload.append(0)  // http
        u16(9000)
        string("127.0.0.1")
        string("POST")
        string("/items")
        string("key-1")
        u32(32); payload += [UInt8](repeating: 7, count: 32)
        string("nightly")
        u32(2)  // body length
        payload += [0, 0]; i64(0)  // state: pending, no flags, retryCount 0
        u32(1); string("Host"); string("127.0.0.1:9000")
        u32(2); payload += Array("hi".utf8)

        let decoded = try payload.withUnsafeBytes { raw in try RecordCodec.decode(type: 1, payload: raw) }
        guard case .created(let request, let state) = decoded else {
            Issue.record("decoded \(decoded)")
            return
        }
        #expect(request.id == id && request.orderingKey == nil)
        #expect(request.tag == "nightly" && request.priority == .high && request.target == "/items")
        #expect(request.body == Array("hi".utf8) && request.headers.first("Host") == "127.0.0.1:9000")
        #expect(state == OperationState())
        var origins = OriginTable()
        let summary = try payload.withUnsafeBytes { raw in try RecordCodec.decodeSummary(type: 1, payload: raw, origins: &origins) }
        guard case .created(let snapshot) = summary else {
            Issue.record("summary \(summary)")
            return
        }
        #expect(snapshot.orderingKey == nil && snapshot.idempotencyKey == "key-1" && snapshot.tag == "nightly")
    }

    @Test func segmentNamesSortAndParseBack_AndStrayNamesAreRejected() {
        #expect(SegmentName(segment: 1, generation: 0).fileName == "00000001.log")
        #expect(SegmentName(segment: 12, generation: 3).fileName == "00000012.3.log")
        #expect(SegmentName(fileName: "00000012.3.log") == SegmentName(segment: 12, generation: 3))
        #expect(SegmentName(fileName: "00000012.log") == SegmentName(segment: 12, generation: 0))
        for stray in ["junk.log", "0001.log", "00000001.log.tmp", "00000001.0.log", "00000001.x.log", "00000001.txt", "+0000001.log"] {
            #expect(SegmentName(fileName: stray) == nil, "\(stray)")
        }
    }

    @Test func filesAreCreated0600InA0700Directory() throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        log.close()
        var info = stat()
        #expect(stat(directory.logPath, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        let names = try directory.fileNames()
        #expect(names == ["00000001.log"])
        for name in names {
            #expect(stat(directory.logPath + "/" + name, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
        }
    }
}
