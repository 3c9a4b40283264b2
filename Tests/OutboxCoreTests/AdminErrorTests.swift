@testable import OutboxAdmin
@testable import OutboxModel
import Testing

/// The admin error table: the status and `code` each error answers with are part of the API
/// (docs/admin-api.md lists them); that a code means one status is `ErrorCode`'s own table.
@Suite("Admin errors: one status and one code per case")
struct AdminErrorTests {
    /// What each case must answer, written out as the README documents it. The switch has no
    /// `default`, so a new case does not compile until its row is added here.
    static func documented(_ error: AdminError) -> (status: Int, code: String) {
        switch error {
        case .invalid: (400, "bad_request")
        case .tokenRequired: (401, "unauthorized")
        case .notLoopback, .proxied, .foreignHost, .crossSiteOrigin: (403, "forbidden")
        case .noEndpoint, .noOperation, .noFault: (404, "not_found")
        case .methodNotAllowed: (405, "method_not_allowed")
        case .notRetryable, .faultExists: (409, "conflict")
        case .faultLimit: (409, "fault_limit")
        case .storeUnavailable: (503, "store_unavailable")
        }
    }

    /// One value of every case.
    static let cases: [AdminError] = [
        .invalid(field: "limit", expected: "an integer from 1 to 1000"),
        .invalid(field: "mode", expected: "offline or auto", got: "sometimes"),
        .tokenRequired, .notLoopback, .proxied, .foreignHost("evil.example"), .crossSiteOrigin("http://evil.example"),
        .noEndpoint(method: "GET", path: "/nope"), .noOperation("42"),
        .methodNotAllowed(allow: ["GET", "HEAD"]),
        .notRetryable(id: "42", status: .completed),
        .noFault("orders-down"), .faultExists("orders-down"), .faultLimit(1000),
        .storeUnavailable("database host db, port 5432: connection refused"),
    ]

    @Test(arguments: cases)
    func eachCaseAnswersItsDocumentedStatusAndCode(_ error: AdminError) {
        let expected = Self.documented(error)
        #expect(error.status == expected.status, "\(error)")
        #expect(error.code.rawValue == expected.code, "\(error)")
    }

    @Test(arguments: cases)
    func theResponseIsTheErrorEnvelopeWithTheCasesStatusCodeAndMessage(_ error: AdminError) throws {
        let response = error.response
        #expect(response.status == error.status)
        #expect(response.raw == nil, "an error is a JSON answer")
        let rendered = try JSONReader.parse(Array(response.body.rendered(pretty: false).utf8))
        let envelope = JSON.object([("error", .object([
            ("code", .string(error.code.rawValue)), ("message", .string(error.message)),
        ]))])
        #expect(rendered == envelope)
        #expect(!error.message.isEmpty)
    }

    @Test func aRefusedTokenNamesTheSchemeAndAWrongMethodNamesTheRightOnes() {
        #expect(AdminError.tokenRequired.response.extraHeaders.map { "\($0.0): \($0.1)" } == ["WWW-Authenticate: Bearer"])
        let wrongMethod = AdminError.methodNotAllowed(allow: ["GET", "HEAD", "DELETE"])
        #expect(wrongMethod.response.extraHeaders.map { "\($0.0): \($0.1)" } == ["Allow: GET, HEAD, DELETE"])
        #expect(wrongMethod.message == "use GET, HEAD, DELETE")
        #expect(AdminError.noOperation("42").response.extraHeaders.isEmpty)
        #expect(AdminError.storeUnavailable("down").response.extraHeaders.map { "\($0.0): \($0.1)" } == ["Retry-After: 1"])
    }

    @Test func anInvalidValueIsNamedOnlyWhenGiven() {
        #expect(AdminError.invalid(field: "mode", expected: "offline or auto", got: "sometimes").message
                == #"mode: expected offline or auto, got "sometimes""#)
        #expect(AdminError.invalid(field: "limit", expected: "an integer from 1 to 1000").message
                == "limit: expected an integer from 1 to 1000")
    }

    @Test func theStatusFilterTakesEveryStatusByItsExactNameAndNothingElse() throws {
        #expect(try AdminAPI.statusFilter([:]) == nil)
        #expect(try AdminAPI.statusFilter(["status": ""]) == nil)
        for status in OperationStatus.allCases {
            #expect(try AdminAPI.statusFilter(["status": status.rawValue]) == status)
        }
        for bad in ["lost", "Failed", "in_progress", " pending"] {
            #expect(throws: AdminError.invalid(field: "status",
                                               expected: "one of pending, inProgress, completed, failed, conflict")) {
                try AdminAPI.statusFilter(["status": bad])
            }
        }
    }
}
