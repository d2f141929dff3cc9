import Foundation

/// An arcade game.
public struct Game: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier.
    public var id: CatalogID
    /// The game's name (1…200 characters).
    public var name: String
    /// A description (up to 5,000 characters; may be empty).
    public var description: String
    /// The name of the image asset the apps show for it, such as `space-invaders`.
    public var imageName: String
    /// The artwork uploaded for it (`PUT /v1/games/{id}/image`), when there is one.
    public var image: ImageReference?
    /// When the game was created.
    public var createdAt: Date
    /// When the game last changed.
    public var updatedAt: Date
    /// Increases by one on every change; the `ETag` is this number in quotes.
    public var version: Int

    /// Creates a game value.
    public init(
        id: CatalogID, name: String, description: String, imageName: String, image: ImageReference? = nil, createdAt: Date, updatedAt: Date,
        version: Int
    ) {
        self.id = id
        self.name = name
        self.description = description
        self.imageName = imageName
        self.image = image
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }
}

/// The body of `POST /v1/games` and `PUT /v1/games/{id}`.
public struct GameInput: Codable, Sendable, Hashable, Validatable {
    /// 1…200 characters.
    public var name: String
    /// Up to 5,000 characters; empty when absent.
    public var description: String
    /// 1…200 letters, digits, `-`, `_` or `.`.
    public var imageName: String

    /// The allowed name length.
    public static let nameLength = 1...200
    /// The allowed description length.
    public static let descriptionLength = 0...5000
    /// The rule `name` keeps.
    public static let nameRule = FieldRule<String>.text(length: nameLength)
    /// The rule `description` keeps.
    public static let descriptionRule = FieldRule<String>.text(length: descriptionLength, multiline: true)
    /// The rule `imageName` keeps.
    public static let imageNameRule = FieldRule<String>.assetName

    /// Creates an input value.
    public init(name: String, description: String = "", imageName: String) {
        self.name = name
        self.description = description
        self.imageName = imageName
    }

    /// Decodes a body; `description` may be absent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        description = try container.decodeIfPresent(String.self, forKey: .description) ?? ""
        imageName = try container.decode(String.self, forKey: .imageName)
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(name, Self.nameRule, at: "/name")
        errors.check(description, Self.descriptionRule, at: "/description")
        errors.check(imageName, Self.imageNameRule, at: "/imageName")
        return errors
    }
}

extension GameInput {
    /// The input that recreates `game` (for editing it).
    public init(_ game: Game) {
        self.init(name: game.name, description: game.description, imageName: game.imageName)
    }
}
