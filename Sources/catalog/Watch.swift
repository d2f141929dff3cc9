import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

/// `catalog watch`: every change to the catalog as it happens, one line each.
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print each change to the catalog as it happens, one line each, until interrupted.",
        discussion: """
            Follows the change feed (GET /v1/changes) with long-polls. Each line is a change as the server sent it, \
            as JSON, or with --table a line such as 'upsert game <id> v3' or 'delete game <id> v4'. Without --since, \
            every change from the beginning comes first. When the token has expired, a note goes to standard error \
            and the feed starts again from the beginning.
            """)

    @OptionGroup var connection: Connection

    @Option(help: "Only these kinds, comma-separated: game, playableItem, location, playlist, comment (default: all).")
    var types: String?

    @Option(help: "Start after this token (a nextToken of the feed); from the beginning when absent.")
    var since: String?

    @Option(help: "Seconds each request waits for a change before asking again (1…60).")
    var wait = 30

    func validate() throws {
        guard ChangesClient.waitRange.contains(wait) else {
            throw ValidationError("--wait must be from \(ChangesClient.waitRange.lowerBound) to \(ChangesClient.waitRange.upperBound).")
        }
        _ = try parsedTypes()
    }

    func run() async throws {
        let kinds = try parsedTypes()
        try await Output.run {
            let feed = try connection.client().changes
            let encoder = CatalogJSON.makeEncoder()
            var token = since
            var failures = 0
            while true {
                let page: ChangePage
                do {
                    page = try await feed.page(since: token, types: kinds, wait: wait)
                } catch  where Self.clientError(error)?.isSyncTokenExpired == true && token != nil {
                    Self.note("the token has expired or is from another database: starting again from the beginning")
                    token = nil
                    continue
                } catch  where Self.clientError(error)?.isTransient == true {
                    failures += 1
                    let seconds = min(30, 1 << min(failures - 1, 5))
                    Self.note("\(error); trying again in \(seconds) s")
                    try await Task.sleep(for: .seconds(seconds))
                    continue
                }
                failures = 0
                for change in page.changes {
                    if connection.table {
                        let line = "\(change.deleted ? "delete" : "upsert") \(change.type) \(change.id) v\(change.version)\n"
                        FileHandle.standardOutput.write(Data(line.utf8))
                    } else {
                        FileHandle.standardOutput.write(try encoder.encode(change) + Data("\n".utf8))
                    }
                }
                token = page.nextToken
            }
        }
    }

    /// The kinds `--types` names; `nil` for all.
    func parsedTypes() throws -> [ChangeType]? {
        guard let types else { return nil }
        let kinds = try types.split(separator: ",").map { (part: Substring) throws -> ChangeType in
            let name = part.trimmingCharacters(in: .whitespaces)
            guard let kind = ChangeType(rawValue: name) else {
                throw ValidationError("--types takes \(ChangeType.allCases.map(\.rawValue).joined(separator: ", ")), comma-separated; not '\(name)'.")
            }
            return kind
        }
        guard !kinds.isEmpty else { throw ValidationError("--types must name at least one kind.") }
        return kinds
    }

    /// `error` as the client reports it, if it is one of the client's.
    static func clientError(_ error: any Error) -> CatalogClientError? {
        error as? CatalogClientError
    }

    /// Writes `message` to standard error.
    static func note(_ message: String) {
        FileHandle.standardError.write(Data("catalog: \(message)\n".utf8))
    }
}
