import Foundation
@testable import OutboxAdmin
@testable import OutboxConfig
import OutboxModel
import Testing

/// The reference docs against the code they describe, so neither can change alone: every config
/// key the parser accepts is in `docs/configuration.md` and `config.example.json` with the
/// default the code uses (`check-config`'s output), every admin route of `AdminRoute` is in
/// `docs/admin-api.md` with its methods, every `ErrorCode` in its error tables with its status,
/// every command in `--help` and the docs, and every relative link of README.md and docs/
/// leads to a file and heading that exist.
@Suite("Docs match the code")
struct DocsDriftTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// `path` → value for every key that is not an object, dotted from the top.
    static func leaves(_ json: JSON, prefix: String = "") -> [(path: String, value: JSON)] {
        guard case .object(let members) = json else { return [(prefix, json)] }
        return members.flatMap { leaves($0.value, prefix: prefix.isEmpty ? $0.key : prefix + "." + $0.key) }
    }

    /// The cells of each table row whose first cell is one backticked name: name → cells.
    static func tableRows(_ text: String) -> [String: [String]] {
        var rows: [String: [String]] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.dropFirst().split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = cells.first, first.hasPrefix("`"), first.hasSuffix("`"), first.count > 2 else { continue }
            rows[String(first.dropFirst().dropLast())] = Array(cells.dropFirst())
        }
        return rows
    }

    /// The first backticked span of a table cell: `` `10485760` (10 MiB) `` → `10485760`.
    static func firstCode(_ cell: String) -> String? {
        guard let open = cell.firstIndex(of: "`") else { return nil }
        let rest = cell[cell.index(after: open)...]
        guard let close = rest.firstIndex(of: "`") else { return nil }
        return String(rest[..<close])
    }

    /// Every key path of `json`, the members of objects inside arrays included (`a.b.c`).
    static func objectLeaves(_ json: JSON, prefix: String = "") -> [(path: String, value: JSON)] {
        switch json {
        case .object(let members):
            return members.flatMap { objectLeaves($0.value, prefix: prefix.isEmpty ? $0.key : prefix + "." + $0.key) }
        case .array(let items):
            return items.flatMap { objectLeaves($0, prefix: prefix) }
        default:
            return [(prefix, json)]
        }
    }

    static var defaults: [(path: String, value: JSON)] {
        get throws { leaves(try JSONReader.parse(Array(OutboxConfig().effectiveJSON().utf8))) }
    }

    @Test func everyConfigKeyIsDocumentedWithTheDefaultTheCodeUses() throws {
        let rows = Self.tableRows(try Self.read("docs/configuration.md"))
        let keys = try Self.defaults
        for (path, value) in keys {
            let row = try #require(rows[path], "docs/configuration.md has no row for config key \(path)")
            #expect(row.count >= 3, "\(path): \(row)")
            let documented = row.count >= 2 ? Self.firstCode(row[1]) : nil
            #expect(documented == value.rendered(), "docs/configuration.md gives \(path) the default \(documented ?? "none"); the code uses \(value.rendered())")
        }
        let known = Set(keys.map(\.path))
        let stale = rows.keys.filter { $0.contains(".") || $0.first?.isLowercase == true }
            .filter { !known.contains($0) && !RetryPresetRows.names.contains($0) }
        #expect(stale.isEmpty, "docs/configuration.md documents keys the parser does not know: \(stale.sorted())")
    }

    /// The preset table's rows are named by preset, not by key.
    enum RetryPresetRows {
        static let names: Set<String> = ["default", "aggressive", "conservative", "linear", "immediate"]
    }

    /// `config.example.json` holds every key, each with its default but `upstream`, which it sets
    /// so that the example forwards somewhere.
    @Test func configExampleHoldsEveryKeyWithItsDefault() throws {
        let example = Self.leaves(try JSONReader.parse(Array(try Self.read("config.example.json").utf8)))
        let values = Dictionary(example.map { ($0.path, $0.value) }, uniquingKeysWith: { first, _ in first })
        let keys = try Self.defaults
        for (path, value) in keys {
            let given = try #require(values[path], "config.example.json lacks \(path)")
            if path != "upstream" {
                #expect(given.rendered() == value.rendered(), "config.example.json sets \(path) to \(given.rendered()); the default is \(value.rendered())")
            }
        }
        #expect(Set(example.map(\.path)) == Set(keys.map(\.path)))
        // And it is a config the parser takes.
        _ = try OutboxConfig.parse(json: Array(try Self.read("config.example.json").utf8))
    }

    /// The parser's own key names (each `case "name":` of the config parser) all show in
    /// `check-config`'s output: a key the parser takes but `check-config` leaves out would
    /// escape the two tests above.
    @Test func everyKeyTheParserTakesIsInCheckConfigsOutput() throws {
        let source = try Self.read("Sources/OutboxConfig/OutboxConfig+Parsing.swift")
        let pattern = try NSRegularExpression(pattern: #"case "([A-Za-z]+)":"#)
        let names = Set(pattern.matches(in: source, range: NSRange(source.startIndex..., in: source)).compactMap {
            Range($0.range(at: 1), in: source).map { String(source[$0]) }
        })
        // The defaults hold no `replay.credentials` rule: one is added so its keys print too.
        var withRule = OutboxConfig()
        withRule.replay.credentials = [CredentialRule(scope: .hosts(.init(["*"])), originText: "*", headers: ["authorization"],
                                                      source: .command, command: ["/bin/true"])]
        let printed = Self.leaves(try JSONReader.parse(Array(withRule.effectiveJSON().utf8)))
            + Self.objectLeaves(try JSONReader.parse(Array(withRule.effectiveJSON().utf8)))
        let components = Set(printed.flatMap { $0.path.split(separator: ".").map(String.init) })
        #expect(!names.isEmpty)
        #expect(names.subtracting(components).isEmpty,
                "the config parser takes \(names.subtracting(components).sorted()), which check-config does not print")
    }

    @Test func everyAdminRouteIsDocumentedWithItsMethods() throws {
        let rows = Self.tableRows(try Self.read("docs/admin-api.md"))
        for route in AdminRoute.allCases {
            let path = "/admin" + (route.template == "/" ? "/" : route.template)
            let row = try #require(rows[path], "docs/admin-api.md has no row for \(path)")
            #expect(row.first == route.methods.joined(separator: ", "), "docs/admin-api.md gives \(path) the methods \(row.first ?? ""); the route takes \(route.methods)")
        }
        let documented = rows.keys.filter { $0.hasPrefix("/admin") }
        let routes = Set(AdminRoute.allCases.map { "/admin" + $0.template })
        #expect(Set(documented) == routes, "routes in docs/admin-api.md that AdminRoute lacks: \(Set(documented).subtracting(routes).sorted())")
    }

    @Test func everyErrorCodeIsDocumentedWithItsStatus() throws {
        let text = try Self.read("docs/admin-api.md")
        var documented: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| ") {
            let cells = line.dropFirst().split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2, let status = Int(cells[0]), let code = Self.firstCode(cells[1]) else { continue }
            documented[code] = status
        }
        for code in ErrorCode.allCases {
            #expect(documented[code.rawValue] == code.status,
                    "docs/admin-api.md lists \(code.rawValue) with status \(documented[code.rawValue].map(String.init) ?? "none"); it is \(code.status)")
        }
        let known = Set(ErrorCode.allCases.map(\.rawValue))
        #expect(Set(documented.keys).subtracting(known).isEmpty, "documented codes no ErrorCode has: \(Set(documented.keys).subtracting(known).sorted())")
    }

    @Test func everyCommandIsInTheHelpAndTheDocs() throws {
        let docs = try Self.read("docs/ci.md")
        let help = CommandLineParser.helpText
        for command in CommandLineParser.commands {
            #expect(help.range(of: #"(^|[\s|])"# + command + #"(\s|$)"#, options: .regularExpression) != nil, "--help does not name \(command)")
            #expect(docs.contains("`outbox " + command), "docs/ci.md does not document `outbox \(command)`")
        }
    }

    /// The Markdown files a reader follows links through.
    static let linkedDocs: [String] = {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)) ?? []
        return ["README.md", "docker/README.md", "Benchmarks/README.md"]
            + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }()

    /// GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens.
    static func anchor(_ heading: String) -> String {
        String(heading.lowercased().compactMap { character -> Character? in
            if character == " " { return "-" }
            if character.isLetter || character.isNumber || character == "-" || character == "_" { return character }
            return nil
        })
    }

    static func anchors(in text: String) -> Set<String> {
        var inCode = false
        var result: Set<String> = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, line.hasPrefix("#") else { continue }
            result.insert(anchor(String(line.drop { $0 == "#" }).trimmingCharacters(in: .whitespaces)))
        }
        return result
    }

    @Test(arguments: linkedDocs)
    func everyRelativeLinkResolves(_ doc: String) throws {
        let text = try Self.read(doc)
        let directory = (doc as NSString).deletingLastPathComponent
        let pattern = try NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
        var inCode = false
        var broken: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            if inCode { continue }
            let string = String(line)
            for match in pattern.matches(in: string, range: NSRange(string.startIndex..., in: string)) {
                guard let range = Range(match.range(at: 1), in: string) else { continue }
                let target = String(string[range])
                if target.contains("://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let file = parts[0].isEmpty ? doc : ((directory as NSString).appendingPathComponent(String(parts[0])) as NSString).standardizingPath
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(file).path, isDirectory: &isDirectory) else {
                    broken.append("\(target): no file \(file)")
                    continue
                }
                if parts.count == 2, !isDirectory.boolValue {
                    let anchors = Self.anchors(in: try Self.read(file))
                    if !anchors.contains(String(parts[1])) { broken.append("\(target): no heading #\(parts[1]) in \(file)") }
                }
            }
        }
        #expect(broken.isEmpty, "\(doc): \(broken.joined(separator: "; "))")
    }
}
