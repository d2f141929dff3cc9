import CatalogModels
import CatalogStore

/// `/v1/games`: arcade games.
enum Games {
    static func endpoints(_ store: CatalogStore, metrics: Metrics) -> ResourceEndpoints<Game, GameInput> {
        ResourceEndpoints(
            metrics: metrics, path: "/v1/games", store: store.games, body: body, readInput: read, inputOf: GameInput.init)
    }

    static let body = BodyFields(writable: ["name", "description", "imageName"])

    static func read(_ object: [String: JSONValue]) throws(APIError) -> GameInput {
        var reader = FieldReader(object, body)
        let name = reader.string("name", required: true) { Rules.text($0, length: GameInput.nameLength) }
        let description = reader.string("description", required: false) { Rules.text($0, length: GameInput.descriptionLength, multiline: true) }
        let imageName = reader.string("imageName", required: true, rule: Rules.assetName)
        try reader.finish()
        guard let name, let imageName else { throw .validation(reader.errors) }
        return GameInput(name: name, description: description ?? "", imageName: imageName)
    }
}
