import CatalogModels
import Foundation
import HTTPServer
import Synchronization

/// The limits of hosted video.
struct VideoSettings: Sendable {
    /// The largest upload.
    var maxBytes = VideoRules.defaultMaxBytes
    /// The most bytes one user's unfinished uploads may still need.
    var quotaBytes = VideoRules.defaultQuotaBytes
}

/// Who holds uploads in this process: each appending request is a holder of its own
/// (this server's id and a number), whose lease in the database is renewed while its
/// body arrives (``renewing(_:)``), so a long body never loses its upload to another
/// request, and a server that dies lets go within ``lease``.
final class UploadLeases: Sendable {
    /// How long a lease lasts without renewal.
    static let lease: Int64 = 120_000
    /// This server's part of every holder's name.
    let server: String
    private let next = Atomic<UInt64>(0)
    /// The uploads held now, by id, with their holder and its request.
    private let held = Mutex<[String: (holder: String, responder: Responder)]>([:])

    init(server: String) {
        self.server = server
    }

    func newHolder() -> String {
        server + "/" + String(next.add(1, ordering: .relaxed).newValue)
    }

    /// When a lease taken now ends.
    func until() -> Int64 {
        Timestamp.milliseconds(Date()) + Self.lease
    }

    func hold(_ id: String, as holder: String, responder: Responder) {
        held.withLock { $0[id] = (holder, responder) }
    }

    /// Ends the request of this server holding the upload `id` while its body still
    /// arrives, if it began before `newer` (a newer request of the upload supersedes it:
    /// the client resumed while its old connection is still open on our side): that
    /// connection closes, and what it received is kept as a cut-off body is.
    func supersede(_ id: String, by newer: String) {
        guard let (holder, responder) = held.withLock({ $0[id] }), Self.number(holder) < Self.number(newer) else { return }
        responder.cut()
    }

    /// `holder` lets go of the upload `id` (nothing when another holds it now).
    func release(_ id: String, holder: String) {
        held.withLock { held in
            if held[id]?.holder == holder { held.removeValue(forKey: id) }
        }
    }

    /// The number of a holder of this server (holders are numbered in the order they came).
    private static func number(_ holder: String) -> UInt64 {
        UInt64(holder.split(separator: "/").last ?? "") ?? 0
    }

    /// The uploads held now, with their holders.
    var current: [String: String] { held.withLock { $0.mapValues(\.holder) } }
}
