import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the whole catalog to standard output as NDJSON, one resource per line (for `catalog import`).")
    @OptionGroup var connection: Connection
    @Option(help: "Also write the original of every image the records show into this folder, each named by its hash (for `catalog import --images`).")
    var images: String?

    func run() async throws {
        try await Output.run {
            let encoder = CatalogJSON.makeEncoder()
            let client = try connection.client()
            var count = 0, written = 0
            if let images { try FileManager.default.createDirectory(atPath: images, withIntermediateDirectories: true) }
            for try await record in client.exportRecords() {
                FileHandle.standardOutput.write(try encoder.encode(record) + Data("\n".utf8))
                count += 1
                guard let images, let image = record.image else { continue }
                let file = URL(fileURLWithPath: images).appendingPathComponent(image.hash)
                guard !FileManager.default.fileExists(atPath: file.path) else { continue }
                try await client.imageData(image).write(to: file, options: .atomic)
                written += 1
            }
            FileHandle.standardError.write(Data("exported \(count) records\(images.map { ", \(written) images into \($0)" } ?? "")\n".utf8))
        }
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read NDJSON records (from `catalog export`) on standard input and apply them, ids preserved; running it twice changes nothing.")
    @OptionGroup var connection: Connection
    @Option(help: "Records per request (1…1000); each batch is applied atomically.") var batch = 500
    @Option(help: "The folder `catalog export --images` wrote: the images the records show are sent first (admins).")
    var images: String?

    /// The most bytes of records one request carries (with room for the envelope).
    static let batchBytes = 768 * 1024

    func run() async throws {
        guard (1...ImportRequest.maxRecords).contains(batch) else { throw ValidationError("--batch must be from 1 to \(ImportRequest.maxRecords).") }
        let decoder = CatalogJSON.makeDecoder()
        // Batches of at most --batch records and about 768 KiB, under the server's default
        // 1 MiB body limit. (A playlist of several thousand entries is a large record on
        // its own; raise the target's --max-body-size to import one.)
        var batches: [[CatalogRecord]] = [[]]
        var batchBytes = 0
        var lineNumber = 0
        while let line = readLine(strippingNewline: true) {
            lineNumber += 1
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            let record: CatalogRecord
            do {
                record = try decoder.decode(CatalogRecord.self, from: Data(line.utf8))
            } catch {
                FileHandle.standardError.write(Data("catalog: line \(lineNumber) is not a catalog record: \(error)\n".utf8))
                throw ExitCode.failure
            }
            if let last = batches.last, !last.isEmpty, last.count == batch || batchBytes + line.utf8.count > Self.batchBytes {
                batches.append([])
                batchBytes = 0
            }
            batches[batches.count - 1].append(record)
            batchBytes += line.utf8.count
        }
        try await Output.run {
            let client = try connection.client()
            if let images {
                var sent: Set<String> = []
                for record in batches.joined() {
                    guard let image = record.image, sent.insert(image.hash).inserted else { continue }
                    let file = URL(fileURLWithPath: images).appendingPathComponent(image.hash)
                    guard let data = try? Data(contentsOf: file) else { throw ValidationError("\(file.path) is missing: the image of a record.") }
                    _ = try await client.importImage(data, hash: image.hash)
                }
            }
            var total = ImportSummary()
            for records in batches where !records.isEmpty {
                let summary = try await client.importRecords(records)
                total.created += summary.created
                total.updated += summary.updated
                total.unchanged += summary.unchanged
            }
            try Output.json(total)
        }
    }
}
