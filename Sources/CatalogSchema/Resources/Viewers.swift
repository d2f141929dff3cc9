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
