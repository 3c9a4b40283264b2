import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// Segments of format version 1 (before frames had a header check) still open: recovery reads
/// them with the old framing and rewrites each as its next generation in version 2, the
/// crash-safe way; appends never go into a version 1 segment.
@Suite struct StorageMigrationTests {
    /// A mixed log: creates, later states with stored responses, deletes.
    static func mixedRecords() -> [LogRecord] {
        var records: [LogRecord] = []
        var created: [OperationRequest] = []
        for index in 0..<30 {
            var request = StorageSamples.request(index, bodySize: 30 + index * 5)
            if index % 4 == 0 { request.tag = "tag-\(index)" }
            if index % 6 == 0 { request.orderingKey = "lane-\(index % 3)" }
            created.append(request)
            records.append(.created(request, OperationState()))
            if index >= 5, index % 3 == 0 {
                let response = StoredResponse(status: 200 + index, headers: ["X-Index": String(index)], body: Array("ok \(index)".utf8))
                records.append(.updated(created[index - 5].id, OperationState(status: .completed, retryCount: 1, lastAttemptAt: Int64(index),
                                                                              response: response)))
            }
            if index >= 8, index % 7 == 0 { records.append(.deleted(created[index - 8].id)) }
        }
        return records
    }

    /// Writes `records` as version 1 segments of about `segmentBytes`, numbered from 1.
    static func writeLegacy(_ records: [LogRecord], segmentBytes: Int, to directory: StorageTestDirectory) throws -> Int {
        try FileManager.default.createDirectory(atPath: directory.logPath, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        var groups: [[LogRecord]] = [[]]
        var size = SegmentHeader.size
        for record in records {
            let frame = LegacySegments.frame(record).count
            if size + frame > segmentBytes, !(groups.last ?? []).isEmpty {
                groups.append([])
                size = SegmentHeader.size
            }
            groups[groups.count - 1].append(record)
            size += frame
        }
        for (index, group) in groups.enumerated() {
            try directory.write(LegacySegments.segment(UInt32(index + 1), records: group).bytes, to: directory.segmentPath(index + 1))
        }
        return groups.count
    }

    /// The same records through today's log: what recovery must give.
    static func reference(_ records: [LogRecord]) async throws -> [RecoveredOperation] {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        for record in records { _ = try await log.append(record) }
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        reopened.close()
        return recovered
    }

    /// The `version` field of a segment's header.
    private static func version(of path: String, in directory: StorageTestDirectory) throws -> UInt16 {
        let bytes = try directory.bytes(of: path)
        return UInt16(bytes[6]) | UInt16(bytes[7]) << 8
    }

    @Test func version1Segments_AreMigratedToVersion2_AndReadBackInFull() async throws {
        let records = Self.mixedRecords()
        let directory = try StorageTestDirectory()
        let segments = try Self.writeLegacy(records, segmentBytes: 1500, to: directory)
        #expect(segments >= 4)
        // The newest one was being written when the process died: a torn tail.
        let newest = directory.segmentPath(segments)
        let torn = try directory.bytes(of: newest) + Array(LegacySegments.frame(.created(StorageSamples.request(99), OperationState())).prefix(40))
        try directory.write(torn, to: newest)
        let expected = try await Self.reference(records)

        let lines = StorageLogLines()
        let (log, recovered) = try StorageSamples.open(directory, lines: lines)
        #expect(recovered.map(\.operation) == expected.map(\.operation))
        #expect(lines.containing("storage_segment_migrated").count == segments, "\(lines.all)")
        #expect(lines.containing("storage_truncated").count == 1, "\(lines.all)")
        #expect(lines.containing("storage_damaged").isEmpty && log.damagedRecords == 0, "\(lines.all)")
        #expect(try directory.fileNames() == (1...segments).map { SegmentName(segment: UInt32($0), generation: 1).fileName })
        for segment in 1...segments { #expect(try Self.version(of: directory.segmentPath(segment, generation: 1), in: directory) == 2) }
        let byID = Dictionary(uniqueKeysWithValues: records.compactMap { record -> (UUID, OperationRequest)? in
            if case .created(let request, _) = record { return (request.id, request) } else { return nil }
        })
        for operation in recovered {
            #expect(try log.readRequest(at: operation.createdAt) == byID[operation.operation.id])
            if let stateAt = operation.stateAt { #expect(try log.readState(at: stateAt).response?.body.isEmpty == false) }
        }

        let extra = StorageSamples.request(500)
        let extraAt = try await log.append(.created(extra, OperationState()))
        #expect(extraAt.segment == UInt32(segments) && extraAt.generation == 1, "appended to \(extraAt), never a version 1 file")
        log.close()
        let quiet = StorageLogLines()
        let (again, recoveredAgain) = try StorageSamples.open(directory, lines: quiet)
        defer { again.close() }
        #expect(recoveredAgain.map(\.operation) == expected.map(\.operation) + [OperationSnapshot(extra, state: OperationState())])
        #expect(quiet.all.filter { $0.contains(" warn ") || $0.contains(" info ") }.isEmpty, "\(quiet.all)")
    }

    /// A version 1 segment whose header is damaged is recognised by its first record, read with
    /// the old framing and migrated; the header's bytes are kept aside.
    @Test func aVersion1SegmentWithADamagedHeader_IsMigrated_AndTheHeaderKeptAside() async throws {
        let records = (0..<5).map { LogRecord.created(StorageSamples.request($0), OperationState()) }
        let directory = try StorageTestDirectory()
        _ = try Self.writeLegacy(records, segmentBytes: 1 << 20, to: directory)
        var bytes = try directory.bytes(of: directory.segmentPath(1))
        bytes[3] ^= 0xFF
        try directory.write(bytes, to: directory.segmentPath(1))
        let lines = StorageLogLines()
        let (log, recovered) = try StorageSamples.open(directory, lines: lines)
        defer { log.close() }
        #expect(recovered.map(\.operation.id) == records.map(\.id))
        #expect(lines.containing("storage_damaged").first?.contains("offset=0 bytes=32 skipped=0") == true, "\(lines.all)")
        #expect(try directory.bytes(of: directory.logPath + "/damaged/00000001.log-0.bin") == Array(bytes[..<32]))
        #expect(try directory.fileNames() == ["00000001.1.log", "damaged"])
    }

    /// Version 1 segments as the old code itself wrote them (main at 5d0e442, records from
    /// `StorageFixtureSamples` in segments of 700 bytes), checked in as base64.
    @Test func version1SegmentsWrittenByTheOldCode_AreMigrated() async throws {
        let directory = try StorageTestDirectory()
        try FileManager.default.createDirectory(atPath: directory.logPath, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        for (name, base64) in Self.oldCodeSegments {
            try directory.write([UInt8](try #require(Data(base64Encoded: base64))), to: directory.logPath + "/" + name)
        }
        let lines = StorageLogLines()
        let (log, recovered) = try StorageSamples.open(directory, lines: lines)
        defer { log.close() }
        let requests = StorageFixtureSamples.requests
        var completed = StorageFixtureSamples.completed
        completed.response = nil
        #expect(recovered.map(\.operation) == [OperationSnapshot(requests[0], state: completed),
                                                OperationSnapshot(requests[1], state: StorageFixtureSamples.failed),
                                                OperationSnapshot(requests[3], state: OperationState())])
        for (operation, request) in zip(recovered, [requests[0], requests[1], requests[3]]) {
            #expect(try log.readRequest(at: operation.createdAt) == request)
        }
        #expect(try log.readState(at: try #require(recovered.first?.stateAt)) == StorageFixtureSamples.completed)
        #expect(lines.containing("storage_segment_migrated").count == Self.oldCodeSegments.count, "\(lines.all)")
        #expect(lines.containing("warn").isEmpty, "\(lines.all)")

        // The version 1 encoder the other tests use writes exactly what the old code wrote.
        let encoded = try StorageTestDirectory()
        #expect(try Self.writeLegacy(StorageFixtureSamples.records, segmentBytes: 700, to: encoded) == Self.oldCodeSegments.count)
        for (name, base64) in Self.oldCodeSegments {
            #expect(try encoded.bytes(of: encoded.logPath + "/" + name) == [UInt8](Data(base64Encoded: base64) ?? Data()), "\(name)")
        }
    }

    /// File name → base64 of the bytes `StorageFixtureDump` printed on main at 5d0e442.
    static let oldCodeSegments: [(String, String)] = [
        ("00000001.log",
         "T0JYTE9HAQABAAAAAAAAAAAAAAAAAAAAAAAAADVT2qFdAQAA6JZa6gEKAAAAAABAAIAAAAAAAAAKAGjlz4sBAAACBQBAHxYAAABmaXh0dXJlLTAuZXhhbXBsZS50ZXN0BAAAAFBPU1QOAAAAL2ZpeHR1cmUvMD9xPTANAAAAZml4dHVyZS1rZXktMCAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAcAAABuaWdodGx5CwAAAGN1c3RvbWVyLTQyZAAAAAAAAAAAAAAAAAADAAAABAAAAEhvc3QWAAAAZml4dHVyZS0wLmV4YW1wbGUudGVzdAUAAABYLUR1cAMAAABvbmUFAAAAWC1EdXADAAAAdHdvZAAAAAAHDhUcIyoxOD9GTVRbYmlwd36FjJOaoaivtr3Ey9LZ4Ofu9fwDChEYHyYtNDtCSVBXXmVsc3qBiI+WnaSrsrnAx87V3OPq8fj/Bg0UGyIpMDc+RUxTWmFob3Z9hIuSmaCnrrXjAAAAaA+6DAELAAAAAABAAIAAAAAAAAALAWjlz4sBAAABAAFBHxYAAABmaXh0dXJlLTEuZXhhbXBsZS50ZXN0AwAAAFBVVA4AAAAvZml4dHVyZS8xP3E9MQ0AAABmaXh0dXJlLWtleS0xIAAAAAEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBBQAAAAAAAAAAAAAAAAADAAAABAAAAEhvc3QWAAAAZml4dHVyZS0xLmV4YW1wbGUudGVzdAUAAABYLUR1cAMAAABvbmUFAAAAWC1EdXADAAAAdHdvBQAAAAEIDxYd"),
        ("00000002.log",
         "T0JYTE9HAQACAAAAAAAAAAAAAAAAAAAAAAAAAPJLHvhzAAAAwV9eUwIKAAAAAABAAIAAAAAAAAAKAg0CAAAAAAAAAOhr5c+LAQAACAAAAEhUVFAgNTAzyQACAAAADAAAAENvbnRlbnQtVHlwZQoAAAB0ZXh0L3BsYWluCgAAAFNldC1Db29raWUDAAAAYT0xBwAAAGNyZWF0ZWQHAQAA25uL9AEMAAAAAABAAIAAAAAAAAAMAmjlz4sBAAABAABCHxYAAABmaXh0dXJlLTIuZXhhbXBsZS50ZXN0BAAAAFBPU1QOAAAAL2ZpeHR1cmUvMj9xPTINAAAAZml4dHVyZS1rZXktMiAAAAACAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAigAAAAAAAAAAAAAAAAAAwAAAAQAAABIb3N0FgAAAGZpeHR1cmUtMi5leGFtcGxlLnRlc3QFAAAAWC1EdXADAAAAb25lBQAAAFgtRHVwAwAAAHR3bygAAAACCRAXHiUsMzpBSE9WXWRrcnmAh46VnKOqsbi/xs3U2+Lp8Pf+BQwTEQAAAOKobDEDDAAAAAAAQACAAAAAAAAADDcAAADegIYYAgsAAAAAAEAAgAAAAAAAAAsDBwUAAAAAAAAA0G/lz4sBAAC4c+XPiwEAAAgAAABIVFRQIDUwMA=="),
        ("00000003.log",
         "T0JYTE9HAQADAAAAAAAAAAAAAAAAAAAAAAAAAE+8Xc8bAgAAxuMikwENAAAAAABAAIAAAAAAAAANA2jlz4sBAAABAgoAAAAAAEAAgAAAAAAAAAoBQx8WAAAAZml4dHVyZS0zLmV4YW1wbGUudGVzdAQAAABQT1NUDgAAAC9maXh0dXJlLzM/cT0zDQAAAGZpeHR1cmUta2V5LTMgAAAAAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMsAQAAAAAAAAAAAAAAAAMAAAAEAAAASG9zdBYAAABmaXh0dXJlLTMuZXhhbXBsZS50ZXN0BQAAAFgtRHVwAwAAAG9uZQUAAABYLUR1cAMAAAB0d28sAQAAAwoRGB8mLTQ7QklQV15lbHN6gYiPlp2kq7K5wMfO1dzj6vH4/wYNFBsiKTA3PkVMU1phaG92fYSLkpmgp661vMPK0djf5u30+wIJEBceJSwzOkFIT1ZdZGtyeYCHjpWco6qxuL/GzdTb4unw9/4FDBMaISgvNj1ES1JZYGdudXyDipGYn6attLvCydDX3uXs8/oBCA8WHSQrMjlAR05VXGNqcXh/ho2Um6KpsLe+xczT2uHo7/b9BAsSGSAnLjU8Q0pRWF9mbXR7gomQl56lrLO6wcjP1t3k6/L5AAcOFRwjKjE4P0ZNVFtiaXB3foWMk5qhqK+2vcTL0tng5+71/AMKERgfJi00O0JJUFdeZWxzeoGIj5adpKuyucDHztXc4+rx+P8GDRQbIikw"),
    ]
}

