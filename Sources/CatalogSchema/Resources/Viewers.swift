import CatalogModels
import Foundation

/// What each viewer keeps for itself (`/v1/me/…`): not resources of the catalog, and never
/// shown to anyone else.
package enum ViewerSchema {
    /// `PUT /v1/me/progress/{playableItemId}`: a player's heartbeat (``ProgressInput``).
    package static let heartbeat = DocumentShape([
        SchemaField("positionSeconds", .none, .number(ProgressInput.secondsRule)),
        SchemaField("durationSeconds", .none, .number(ProgressInput.secondsRule), required: false, nullable: true),
        SchemaField("clientTime", .none, .timestamp),
        SchemaField("deviceId", .none, .text(ProgressInput.deviceRule)),
        SchemaField("played", .none, .boolean, required: false, nullable: true),
    ])

    /// `PUT /v1/me/ratings/{playableItemId}` (``RatingInput``).
    package static let rating = DocumentShape([SchemaField("rating", .none, .text(Rating.rule))])

    /// `POST /v1/playable-items/{id}/views` (``ViewInput``).
    package static let view = DocumentShape([
        SchemaField("sessionId", .none, .text(ViewInput.sessionRule)),
        SchemaField("positionSeconds", .none, .number(ProgressInput.secondsRule)),
        SchemaField("durationSeconds", .none, .number(ProgressInput.secondsRule), required: false, nullable: true),
    ])

    /// The `include` that embeds the caller's own ``ViewerState`` in an item.
    package static let stateInclude = "viewerState"

    /// The resource a favorite of `type` is.
    package static func schema(of type: FavoriteType) -> ResourceSchema {
        switch type {
        case .playableItem: .playableItem
        case .game: .game
        case .playlist: .playlist
        }
    }

    /// The path parameter naming the item of `/v1/me/progress/{…}`.
    package static let itemParameter = "playableItemId"

    /// A viewer's progress as its row holds it.
    package static func progress(
        item: CatalogID, position: Double, duration: Double?, played: Bool, playCount: Int, watchedAt: Date, device: String, version: Int
    ) -> PlaybackProgress {
        PlaybackProgress(
            playableItemId: item, positionSeconds: position, durationSeconds: duration, played: played, playCount: playCount, watchedAt: watchedAt,
            deviceId: device, version: version)
    }

    /// The item `progress` is in, and its running time as kept.
    package static func item(of progress: PlaybackProgress) -> (id: CatalogID, duration: Double?) {
        (progress.playableItemId, progress.durationSeconds)
    }

    /// A viewer's rating of `item` as its row holds it: `liked` (1 like, 0 dislike) and
    /// when, or no row (`none`).
    package static func rating(item: CatalogID, liked: Bool?, at milliseconds: Int64?) -> ItemRating {
        guard let liked, let milliseconds else { return ItemRating(playableItemId: item, rating: .none) }
        return ItemRating(playableItemId: item, rating: liked ? .like : .dislike, ratedAt: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    /// A view counted for a viewer, as its row holds it.
    package static func countedView(item: CatalogID, at milliseconds: Int64) -> CountedView {
        CountedView(playableItemId: item, countedAt: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    /// Whether `view` has played long enough to count (``ViewRules``), given the item's
    /// own running time (which comes before the player's).
    package static func hasPlayedEnough(_ view: ViewInput, itemDuration: Double?) -> Bool {
        ViewRules.hasPlayedEnough(position: view.positionSeconds, duration: itemDuration ?? view.durationSeconds)
    }

    /// The view report `values` (read by ``view``) hold.
    package static func view(_ values: FieldValues) -> ViewInput? {
        guard let session = values["sessionId"]?.text, let position = values["positionSeconds"]?.real else { return nil }
        return ViewInput(sessionId: session, positionSeconds: position, durationSeconds: values["durationSeconds"]?.real)
    }

    /// The heartbeat `values` (read by ``heartbeat``) hold.
    package static func heartbeat(_ values: FieldValues) -> ProgressInput? {
        guard let position = values["positionSeconds"]?.real, let time = values["clientTime"]?.integer, let device = values["deviceId"]?.text else {
            return nil
        }
        return ProgressInput(
            positionSeconds: position, durationSeconds: values["durationSeconds"]?.real,
            clientTime: Date(timeIntervalSince1970: Double(time) / 1000), deviceId: device, played: values["played"]?.integer.map { $0 != 0 })
    }
}

extension SchemaField {
    /// What every viewer adds up to, in a counted resource (``ResourceSchema/counted``):
    /// `likeCount` and `viewCount`, zero when created, then set only by the server's
    /// batches. Import records carry them (an export's counts arrive with it); they are
    /// written when the import creates the resource, never over a server's own.
    package static let counts = ["likeCount": "like_count", "viewCount": "view_count"].sorted { $0.key < $1.key }.map { name, column in
        SchemaField(
            name, .column(column), .integer(.integer(in: 0...Int.max)), access: .serverSet, required: false, default: .integer(0), import: .insertOnly)
    }
}
