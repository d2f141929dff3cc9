import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the whole catalog to standard output as NDJSON, one resource per line (for `catalog import`).")
    @OptionGroup var connection: Connection

    func run() async throws {
        try await Output.run {
            let encoder = CatalogJSON.makeEncoder()
            var count = 0
            for try await record in try connection.client().exportRecords() {
                FileHandle.standardOutput.write(try encoder.encode(record) + Data("\n".utf8))
                count += 1
            }
            FileHandle.standardError.write(Data("exported \(count) records\n".utf8))
        }
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read NDJSON records (from `catalog export`) on standard input and apply them, ids preserved; running it twice changes nothing.")
    @OptionGroup var connection: Connection
    @Option(help: "Records per request (1…1000); each batch is applied atomically.") var batch = 500

    func run() async throws {
        guard (1...ImportRequest.maxRecords).contains(batch) else { throw ValidationError("--batch must be from 1 to \(ImportRequest.maxRecords).") }
        let decoder = CatalogJSON.makeDecoder()
        var records: [CatalogRecord] = []
        var lineNumber = 0
        while let line = readLine(strippingNewline: true) {
            lineNumber += 1
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            do {
                records.append(try decoder.decode(CatalogRecord.self, from: Data(line.utf8)))
            } catch {
                FileHandle.standardError.write(Data("catalog: line \(lineNumber) is not a catalog record: \(error)\n".utf8))
                throw ExitCode.failure
            }
        }
        try await Output.run {
            let client = try connection.client()
            var total = ImportSummary()
            for start in stride(from: 0, to: records.count, by: batch) {
                let summary = try await client.importRecords(Array(records[start..<min(start + batch, records.count)]))
                total.created += summary.created
                total.updated += summary.updated
                total.unchanged += summary.unchanged
            }
            try Output.json(total)
        }
    }
}
