import Foundation

/// A JSON object from a response body (the admin API, a `202`), with typed lookups that
/// return nil rather than trap, so a wrong shape fails an `#expect` that shows the text.
struct JSONObject: CustomStringConvertible {
    let fields: [String: Any]
    /// The body as received, for failure messages.
    let text: String

    /// Parses `bytes`; throws when they are not a JSON object.
    init(parsing bytes: [UInt8]) throws {
        text = String(decoding: bytes, as: UTF8.self)
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            throw HarnessError("not a JSON object: \(text.prefix(500))")
        }
        fields = object
    }

    /// Parses the body of `response`; the error names the whole response.
    init(_ response: HTTPResponse) throws {
        do {
            try self.init(parsing: response.body)
        } catch {
            throw HarnessError("response body is not a JSON object:\n\(response)")
        }
    }

    private init(fields: [String: Any]) {
        self.fields = fields
        let data = try? JSONSerialization.data(withJSONObject: fields)
        text = data.map { String(decoding: $0, as: UTF8.self) } ?? "\(fields)"
    }

    /// Whether `key` is present (even with a null value).
    func has(_ key: String) -> Bool { fields[key] != nil }

    /// A string member, nil when missing or of another type.
    func string(_ key: String) -> String? { fields[key] as? String }

    /// An integer member, nil when missing or of another type.
    func int(_ key: String) -> Int? {
        if let value = fields[key] as? Int { return value }
        return (fields[key] as? NSNumber)?.intValue
    }

    /// A boolean member, nil when missing or of another type.
    func bool(_ key: String) -> Bool? { fields[key] as? Bool }

    /// A nested object, nil when missing, null or of another type.
    func object(_ key: String) -> JSONObject? {
        (fields[key] as? [String: Any]).map { JSONObject(fields: $0) }
    }

    /// An array of objects, nil when missing or of another type (non-objects are skipped).
    func objects(_ key: String) -> [JSONObject]? {
        (fields[key] as? [Any]).map { $0.compactMap { ($0 as? [String: Any]).map { JSONObject(fields: $0) } } }
    }

    /// Whether `key` is present with the value null.
    func isNull(_ key: String) -> Bool { fields[key] is NSNull }

    var description: String { text }
}
