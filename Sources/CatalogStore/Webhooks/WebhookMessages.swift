import CatalogModels
import Foundation

extension ChangeLog {
    /// The bodies of the messages of `events` (by event), rendered from one snapshot:
    /// `{"data":…,"timestamp":…,"type":…}` (``WebhookMessage``), where `data` is the change
    /// as the feed shows it to an admin. An upsert whose resource is gone by now (its
    /// deletion has an event of its own) carries no `resource`.
    package func webhookBodies(_ events: [WebhookEvent]) throws(StoreError) -> [Int64: [UInt8]] {
        try guarded {
            try database.snapshot { db in
                var wanted: [String: Set<CatalogID>] = [:]
                for event in events where !event.deleted {
                    if let id = CatalogID(event.id) { wanted[event.type, default: []].insert(id) }
                }
                var rendered: [String: [CatalogID: RenderedResource]] = [:]
                for (type, ids) in wanted {
                    guard let render = renderers[type] else { continue }
                    rendered[type] = try render(db, Array(ids))
                }
                var bodies: [Int64: [UInt8]] = [:]
                for event in events {
                    let data: [UInt8]
                    if event.deleted {
                        data = ChangeRecord.deletion(type: event.type, id: event.id, version: event.version)
                    } else if let id = CatalogID(event.id), let resource = rendered[event.type]?[id] {
                        data = Self.upsert(type: event.type, id: event.id, resource: resource)
                    } else {
                        var writer = JSONWriter(capacity: 128)
                        writer.raw("{\"id\":")
                        writer.string(event.id)
                        writer.raw(",\"type\":")
                        writer.string(event.type)
                        writer.raw(",\"version\":")
                        writer.integer(Int64(event.version))
                        writer.raw("}")
                        data = writer.bytes
                    }
                    var writer = JSONWriter(capacity: data.count + 96)
                    writer.raw("{\"data\":")
                    writer.raw(data)
                    writer.raw(",\"timestamp\":")
                    writer.string(Timestamp.string(milliseconds: event.changedAt))
                    writer.raw(",\"type\":")
                    writer.string(event.eventType)
                    writer.raw("}")
                    bodies[event.seq] = writer.bytes
                }
                return bodies
            }
        }
    }
}
