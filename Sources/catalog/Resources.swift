import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

struct Games: AsyncParsableCommand, CLIResource {
    static let configuration = CommandConfiguration(
        abstract: "Arcade games.",
        subcommands: [
            ListCommand<Games>.self, GetCommand<Games>.self, Create.self, DeleteCommand<Games>.self, ImageCommand<Games>.self,
        ])
    static let noun = "game"

    static func resource(_ client: CatalogClient) -> ResourceClient<Game, GameInput> { client.games }

    static func fields(_ game: Game) -> [(String, String)] {
        [
            ("id", game.id.rawValue), ("name", game.name), ("imageName", game.imageName), ("image", game.image?.url ?? ""),
            ("description", game.description), ("version", "\(game.version)"),
        ]
    }

    typealias Filters = SearchFilter
    static let listColumns = ["id", "name", "imageName"]
    static func listRow(_ game: Game) -> [String] { [game.id.rawValue, game.name, game.imageName] }

    struct Create: AsyncParsableCommand {
        @OptionGroup var connection: Connection
        @Option var name: String
        @Option var imageName: String
        @Option var description = ""

        func run() async throws {
            let input = GameInput(name: name, description: description, imageName: imageName)
            try await Output.run { try Output.one(try await connection.client().games.create(input), connection: connection, fields: Games.fields) }
        }
    }

}

struct Items: AsyncParsableCommand, CLIResource {
    static let configuration = CommandConfiguration(
        abstract: "Playable items (streaming videos).",
        subcommands: [
            ListCommand<Items>.self, GetCommand<Items>.self, Create.self, DeleteCommand<Items>.self, ImageCommand<Items>.self, Upload.self,
        ])
    static let noun = "item"

    static func resource(_ client: CatalogClient) -> ResourceClient<PlayableItem, PlayableItemInput> { client.playableItems }

    static func fields(_ item: PlayableItem) -> [(String, String)] {
        [
            ("id", item.id.rawValue), ("title", item.title), ("streamURL", item.streamURL.absoluteString),
            ("thumbnailURL", item.thumbnailURL?.absoluteString ?? ""), ("image", item.image?.url ?? ""), ("durationSeconds", item.durationSeconds.map { "\($0)" } ?? ""),
            ("video", item.video.map { $0.status.rawValue + ($0.error.map { ": " + $0 } ?? "") } ?? ""),
            ("description", item.description), ("version", "\(item.version)"),
        ]
    }

    typealias Filters = SearchFilter
    static let listColumns = ["id", "title", "streamURL"]
    static func listRow(_ item: PlayableItem) -> [String] { [item.id.rawValue, item.title, item.streamURL.absoluteString] }

    struct Create: AsyncParsableCommand {
        @OptionGroup var connection: Connection
        @Option var title: String
        @Option(help: "An absolute http(s) URL, such as an HLS playlist.") var streamURL: String
        @Option var description = ""
        @Option var thumbnailURL: String?
        @Option var duration: Double?

        func run() async throws {
            guard let stream = URL(string: streamURL) else { throw ValidationError("--stream-url must be a URL.") }
            let input = PlayableItemInput(
                title: title, description: description, streamURL: stream,
                thumbnailURL: thumbnailURL.flatMap(URL.init(string:)), durationSeconds: duration)
            try await Output.run { try Output.one(try await connection.client().playableItems.create(input), connection: connection, fields: Items.fields) }
        }
    }

    struct Upload: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Upload a video file as the item's hosted video, resumably; progress on standard error.",
            discussion: "Run it again with --resume UPLOAD (the path it printed first) to go on from where the server is.")

        @OptionGroup var connection: Connection
        @Argument(help: "The item's id.") var id: String
        @Argument(help: "The video file.") var file: String
        @Option(help: "An unfinished upload of this file to go on with (/v1/uploads/…).") var resume: String?
        @Option(help: "Bytes sent per request.") var chunkSize = 8 << 20

        func run() async throws {
            let id = try Output.id(id)
            let url = URL(fileURLWithPath: file)
            guard FileManager.default.isReadableFile(atPath: url.path) else { throw ValidationError("Cannot read \(file).") }
            guard (1 << 16...1 << 30).contains(chunkSize) else { throw ValidationError("--chunk-size must be from 65536 to 1073741824.") }
            try await Output.run {
                let videos = try connection.client().videos
                let path: String
                if let resume { path = resume } else { path = try await videos.start(url, for: id) }
                FileHandle.standardError.write(Data("upload \(path)\n".utf8))
                try await videos.resume(url, at: path, chunkSize: chunkSize) { sent, total in
                    let percent = total == 0 ? 100 : Int(sent * 100 / total)
                    FileHandle.standardError.write(Data("\(sent)/\(total) bytes (\(percent)%)\n".utf8))
                }
                try Output.one(try await connection.client().playableItems.get(id), connection: connection, fields: Items.fields)
            }
        }
    }

}

struct Locations: AsyncParsableCommand, CLIResource {
    static let configuration = CommandConfiguration(abstract: "Named places.", subcommands: [ListCommand<Locations>.self, GetCommand<Locations>.self])
    static let noun = "location"

    static func resource(_ client: CatalogClient) -> ResourceClient<Location, LocationInput> { client.locations }

    static func fields(_ location: Location) -> [(String, String)] {
        [
            ("id", location.id.rawValue), ("name", location.name), ("countryCode", location.countryCode),
            ("latitude", "\(location.latitude)"), ("longitude", "\(location.longitude)"), ("version", "\(location.version)"),
        ]
    }

    static let listColumns = ["id", "name", "country", "distance (m)"]
    static func listRow(_ location: Location) -> [String] {
        [location.id.rawValue, location.name, location.countryCode, location.distanceMeters.map { String(Int($0.rounded())) } ?? ""]
    }

    /// `--near lat,lon [--radius m]`: by distance from a point.
    struct Filters: ListFilters {
        @Option(help: "lat,lon: order by distance from this point.") var near: String?
        @Option(help: "Meters from --near (default: the whole Earth).") var radius: Double?

        func apply(to query: inout ListQuery) throws {
            guard let near else { return }
            let parts = near.split(separator: ",").compactMap { Double($0) }
            guard parts.count == 2 else { throw ValidationError("--near takes lat,lon.") }
            query.near = (latitude: parts[0], longitude: parts[1], radius: radius ?? 20_037_509)
        }
    }
}
