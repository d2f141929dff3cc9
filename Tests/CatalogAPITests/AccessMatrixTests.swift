import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// Every route, tried as each kind of caller against a real server: anonymous, a member
/// who owns the resources involved, another member, an editor and an admin. A route
/// served without a row here fails the test.
@Suite struct AccessMatrixTests {
    enum Caller: Int, CaseIterable, CustomStringConvertible {
        case anonymous, owner, other, editor, admin
        var description: String { ["anonymous", "owner", "other member", "editor", "admin"][rawValue] }
    }

    /// One request: its path, JSON body (with the content type) and, when the row needs
    /// a caller of its own (deleting one's account), that caller's key.
    struct Call {
        var path: String
        var body: Any?
        var contentType = "application/json"
        var key: String?
        /// A body of bytes (an image), sent with ``contentType``.
        var data: [UInt8]?
        /// More header fields (an upload's).
        var headers: [String: String] = [:]
    }

    /// A call that uploads a small PNG to `path`.
    static func upload(_ path: String) -> Call {
        Call(path: path, contentType: "image/png", data: TestImages.png(width: 8, height: 8))
    }

    /// The world the calls act on: users of every kind and resources the owner owns.
    final class World: Sendable {
        let catalog: TestCatalog
        let owner: (key: String, id: CatalogID)
        let other: (key: String, id: CatalogID)
        let editor: (key: String, id: CatalogID)
        let item: CatalogID
        let playlist: CatalogID
        let comment: CatalogID
        let ownerKeyID: CatalogID
        /// An image the item shows.
        let imageHash: String
        /// A ready video the item shows, and the name of one of its renditions.
        let video: String
        let rendition: String
        /// A webhook endpoint (at an address that never resolves) with a delivery.
        let webhook: CatalogID
        let delivery: CatalogID

        init() async throws {
            catalog = try TestCatalog(seed: false)
            owner = try catalog.user("Owner")
            other = try catalog.user("Other")
            editor = try catalog.user("Editor", role: .editor)
            item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Item", streamURL: URL(string: "https://example.com/v")!)).value.id
            let ownerAPI = CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(owner.key), timeout: 10)
            playlist = try await ownerAPI.playlists.create(PlaylistInput(title: "Owned")).value.id
            _ = try await ownerAPI.entries(of: playlist).replace(with: [item, item])
            comment = try await ownerAPI.comments.post(on: item, CommentInput(body: "Mine")).value.id
            ownerKeyID = try await ownerAPI.apiKeys.list().items[0].id
            let shown = try await catalog.client.send(
                "PUT", "/v1/playable-items/\(item)/image", headers: ["Content-Type": "image/png"], body: Data(TestImages.png(width: 4, height: 4)))
            imageHash = try shown.decode(PlayableItem.self).image?.hash ?? ""
            let clip = try Data(contentsOf: try await TestVideos.clip(seconds: 1, width: 160, height: 90, audio: false))
            let created = try await catalog.inProcess.send(
                "POST", "/v1/playable-items/\(item)/video", headers: ["Content-Type": "application/octet-stream"], body: clip)
            video = String(created.header("Location")?.split(separator: "/").last ?? "")
            try await catalog.processVideos()
            rendition = "90p"
            webhook = try await Self.webhook(catalog)
            _ = try await catalog.api.games.create(GameInput(name: "Sent", imageName: "g"))
            var deliveries = Page<WebhookDelivery>(items: [], nextCursor: nil)
            for _ in 0..<400 where deliveries.items.isEmpty {
                catalog.application.wakeWebhooks()
                deliveries = try await catalog.client.get("/v1/webhooks/\(webhook)/deliveries").decode(Page<WebhookDelivery>.self)
                if deliveries.items.isEmpty { try await Task.sleep(for: .milliseconds(25)) }
            }
            delivery = try #require(deliveries.items.first).id
        }

        /// The path of a new upload of 4 bytes for a fresh item, by the editor.
        func freshUpload() async throws -> String {
            let created = try await APIClient(inProcess: catalog.application.server, key: editor.key).send(
                "POST", "/v1/playable-items/\(try await freshItem())/video", headers: ["Tus-Resumable": "1.0.0", "Upload-Length": "4"])
            return created.header("Location") ?? "/v1/uploads/none"
        }

        var ownerAPI: CatalogClient { CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(owner.key), timeout: 10) }

        func key(_ caller: Caller) -> String? {
            switch caller {
            case .anonymous: nil
            case .owner: owner.key
            case .other: other.key
            case .editor: editor.key
            case .admin: catalog.adminKey
            }
        }

        /// A new webhook endpoint, made by the admin.
        static func webhook(_ catalog: TestCatalog) async throws -> CatalogID {
            try await catalog.client.send("POST", "/v1/webhooks", json: ["url": "https://receiver.invalid/hook"]).decode(Identified.self).id
        }

        func freshItem() async throws -> CatalogID {
            try await catalog.api.playableItems.create(PlayableItemInput(title: "Fresh", streamURL: URL(string: "https://example.com/f")!)).value.id
        }

        func freshPlaylist() async throws -> CatalogID {
            let id = try await ownerAPI.playlists.create(PlaylistInput(title: "Fresh")).value.id
            _ = try await ownerAPI.entries(of: id).replace(with: [item, item])
            return id
        }

        /// The path of `caller`'s progress in the item, recorded first (nothing for anonymous).
        func recordProgress(_ caller: Caller) async throws -> Call {
            let path = "/v1/me/progress/\(item)"
            if let key = key(caller) {
                let body: [String: Any] = ["positionSeconds": 42, "clientTime": "2026-11-01T10:00:00.000Z", "deviceId": "phone"]
                _ = try await APIClient(inProcess: catalog.application.server, key: key).send("PUT", path, json: body)
            }
            return Call(path: path)
        }

        /// The path of `caller`'s favorite item, made one first (nothing for anonymous).
        func favorite(_ caller: Caller) async throws -> Call {
            let path = "/v1/me/favorites/playable-items/\(item)"
            if let key = key(caller) { _ = try await APIClient(inProcess: catalog.application.server, key: key).send("PUT", path) }
            return Call(path: path)
        }

        func firstEntry(_ playlist: CatalogID) async throws -> CatalogID {
            try await catalog.api.entries(of: playlist).list().items[0].entryId
        }
    }

    typealias Row = (expected: [Int], call: (World, Caller) async throws -> Call)

    static func same(_ status: Int) -> [Int] { Array(repeating: status, count: 5) }
    /// Editors and admins only.
    static func editors(_ status: Int) -> [Int] { [401, 403, 403, status, status] }
    /// Admins only.
    static func admins(_ status: Int) -> [Int] { [401, 403, 403, 403, status] }
    /// The owner, editors and admins.
    static func owners(_ status: Int) -> [Int] { [401, status, 403, status, status] }
    /// Anyone signed in.
    static func members(_ status: Int) -> [Int] { [401, status, status, status, status] }

    static let patch = "application/merge-patch+json"

    /// The expected statuses by `METHOD pattern`, in ``Caller`` order.
    static func matrix() -> [String: Row] {
        var rows: [String: Row] = [
            "GET /healthz": (same(200), { _, _ in Call(path: "/healthz") }),
            "GET /readyz": (same(200), { _, _ in Call(path: "/readyz") }),
            "GET /openapi.yaml": (same(200), { _, _ in Call(path: "/openapi.yaml") }),
            "GET /metrics": (admins(200), { _, _ in Call(path: "/metrics") }),
            "POST /admin/backups": (admins(TestEngine.isSQLite ? 201 : 501), { _, _ in Call(path: "/admin/backups") }),
            "POST /admin/import": (admins(200), { _, _ in Call(path: "/admin/import", body: ["records": []]) }),

            "GET /v1/playlists": (same(200), { _, _ in Call(path: "/v1/playlists") }),
            "POST /v1/playlists": (members(201), { _, _ in Call(path: "/v1/playlists", body: ["title": "New"]) }),
            "GET /v1/playlists/{id}": (same(200), { world, _ in Call(path: "/v1/playlists/\(world.playlist)") }),
            "PUT /v1/playlists/{id}": (owners(200), { world, _ in Call(path: "/v1/playlists/\(world.playlist)", body: ["title": "Renamed"]) }),
            "PATCH /v1/playlists/{id}": (
                owners(200),
                { world, _ in
                    Call(path: "/v1/playlists/\(world.playlist)", body: ["description": "d"], contentType: patch)
                }
            ),
            "DELETE /v1/playlists/{id}": (owners(204), { world, _ in Call(path: "/v1/playlists/\(try await world.freshPlaylist())") }),
            "GET /v1/playlists/{id}/entries": (same(200), { world, _ in Call(path: "/v1/playlists/\(world.playlist)/entries") }),
            "POST /v1/playlists/{id}/entries": (
                owners(201),
                { world, _ in
                    Call(path: "/v1/playlists/\(world.playlist)/entries", body: ["playableItemId": world.item.rawValue])
                }
            ),
            "PUT /v1/playlists/{id}/entries": (
                owners(200),
                { world, _ in
                    Call(path: "/v1/playlists/\(world.playlist)/entries", body: ["playableItemIds": [world.item.rawValue, world.item.rawValue]])
                }
            ),
            "GET /v1/playlists/{id}/entries/{entryId}": (
                same(200),
                { world, _ in
                    Call(path: "/v1/playlists/\(world.playlist)/entries/\(try await world.firstEntry(world.playlist))")
                }
            ),
            "PATCH /v1/playlists/{id}/entries/{entryId}": (
                owners(200),
                { world, _ in
                    Call(path: "/v1/playlists/\(world.playlist)/entries/\(try await world.firstEntry(world.playlist))", body: ["position": 1], contentType: patch)
                }
            ),
            "DELETE /v1/playlists/{id}/entries/{entryId}": (
                owners(204),
                { world, _ in
                    let playlist = try await world.freshPlaylist()
                    return Call(path: "/v1/playlists/\(playlist)/entries/\(try await world.firstEntry(playlist))")
                }
            ),
            "GET /v1/playlists/{id}/entries/{entryId}/next": (
                same(200),
                { world, _ in
                    Call(path: "/v1/playlists/\(world.playlist)/entries/\(try await world.firstEntry(world.playlist))/next")
                }
            ),

            "GET /v1/playable-items/{id}/comments": (same(200), { world, _ in Call(path: "/v1/playable-items/\(world.item)/comments") }),
            "POST /v1/playable-items/{id}/comments": (members(201), { world, _ in Call(path: "/v1/playable-items/\(world.item)/comments", body: ["body": "Hi"]) }),
            "GET /v1/comments/{id}": (same(200), { world, _ in Call(path: "/v1/comments/\(world.comment)") }),
            "PATCH /v1/comments/{id}": (owners(200), { world, _ in Call(path: "/v1/comments/\(world.comment)", body: ["body": "Edited"], contentType: patch) }),
            "DELETE /v1/comments/{id}": (
                owners(204),
                { world, _ in
                    Call(path: "/v1/comments/\(try await world.ownerAPI.comments.post(on: world.item, CommentInput(body: "Doomed")).value.id)")
                }
            ),
            "GET /v1/comments/{id}/replies": (same(200), { world, _ in Call(path: "/v1/comments/\(world.comment)/replies") }),
            "GET /v1/changes": (same(200), { _, _ in Call(path: "/v1/changes?types=game&limit=5") }),
            "POST /v1/playable-items/{id}/video": (
                editors(201),
                { world, _ in Call(path: "/v1/playable-items/\(try await world.freshItem())/video", headers: ["Tus-Resumable": "1.0.0", "Upload-Length": "4"]) }
            ),
            // An upload is its uploader's (the editor here) and admins'.
            "HEAD /v1/uploads/{uploadId}": (editors(200), { world, _ in Call(path: try await world.freshUpload(), headers: ["Tus-Resumable": "1.0.0"]) }),
            "PATCH /v1/uploads/{uploadId}": (
                editors(204),
                { world, _ in
                    Call(
                        path: try await world.freshUpload(), contentType: "application/offset+octet-stream", data: Array("abcd".utf8),
                        headers: ["Tus-Resumable": "1.0.0", "Upload-Offset": "0"])
                }
            ),
            "DELETE /v1/uploads/{uploadId}": (editors(204), { world, _ in Call(path: try await world.freshUpload(), headers: ["Tus-Resumable": "1.0.0"]) }),
            "GET /v1/videos/{id}/{access}/{file}": (same(200), { world, _ in Call(path: "/v1/videos/\(world.video)/media/master.m3u8") }),
            "GET /v1/videos/{id}/{access}/{rendition}/{file}": (
                same(200), { world, _ in Call(path: "/v1/videos/\(world.video)/media/\(world.rendition)/index.m3u8") }
            ),
            "GET /v1/images/{hash}": (same(200), { world, _ in Call(path: "/v1/images/\(world.imageHash)?w=64&format=webp") }),
            // The original the item shows, sent again as another catalog's would be.
            "PUT /admin/images/{hash}": (
                admins(200),
                { world, _ in
                    let original = Array(try await world.catalog.client.get("/v1/images/\(world.imageHash)").body)
                    return Call(path: "/admin/images/\(world.imageHash)", contentType: "image/png", data: original)
                }
            ),
            "PUT /v1/playlists/{id}/image": (owners(200), { world, _ in upload("/v1/playlists/\(world.playlist)/image") }),
            "DELETE /v1/playlists/{id}/image": (owners(204), { world, _ in Call(path: "/v1/playlists/\(world.playlist)/image") }),
            // A user's avatar is the user's and admins' to set.
            "PUT /v1/users/{id}/image": ([401, 200, 403, 403, 200], { world, _ in upload("/v1/users/\(world.owner.id)/image") }),
            "DELETE /v1/users/{id}/image": ([401, 204, 403, 403, 204], { world, _ in Call(path: "/v1/users/\(world.owner.id)/image") }),

            "GET /v1/users": (admins(200), { _, _ in Call(path: "/v1/users") }),
            "POST /v1/users": (admins(201), { _, _ in Call(path: "/v1/users", body: ["displayName": "Made"]) }),
            "GET /v1/users/{id}": (same(200), { world, _ in Call(path: "/v1/users/\(world.owner.id)") }),
            "PATCH /v1/users/{id}": (
                admins(200),
                { world, _ in
                    Call(path: "/v1/users/\(try world.catalog.user("Promoted").id)", body: ["role": "editor"], contentType: patch)
                }
            ),
            "DELETE /v1/users/{id}": (admins(204), { world, _ in Call(path: "/v1/users/\(try world.catalog.user("Doomed").id)") }),
            "GET /v1/me": (members(200), { _, _ in Call(path: "/v1/me") }),
            "PATCH /v1/me": (members(200), { _, _ in Call(path: "/v1/me", body: ["avatarURL": "https://example.com/me.png"], contentType: patch) }),
            // Each caller deletes an account of its own kind, not the world's.
            "DELETE /v1/me": (
                members(204),
                { world, caller in
                    let role: Role = caller == .admin ? .admin : caller == .editor ? .editor : .member
                    return Call(path: "/v1/me", key: caller == .anonymous ? nil : try world.catalog.user("Leaving", role: role).key)
                }
            ),

            // A viewer's own progress: each caller reads and forgets what it recorded itself.
            "PUT /v1/me/progress/{playableItemId}": (
                members(200),
                { world, _ in
                    Call(path: "/v1/me/progress/\(world.item)", body: ["positionSeconds": 42, "clientTime": "2026-11-01T10:00:00.000Z", "deviceId": "phone"])
                }
            ),
            "GET /v1/me/progress/{playableItemId}": ([401, 200, 200, 200, 200], { world, caller in try await world.recordProgress(caller) }),
            "DELETE /v1/me/progress/{playableItemId}": ([401, 204, 204, 204, 204], { world, caller in try await world.recordProgress(caller) }),
            "GET /v1/me/continue-watching": (members(200), { _, _ in Call(path: "/v1/me/continue-watching") }),
            // Favorites and ratings: each caller's own. Making one a favorite again is a 204.
            "PUT /v1/me/favorites/{type}/{id}": (members(201), { world, _ in Call(path: "/v1/me/favorites/playable-items/\(try await world.freshItem())") }),
            "DELETE /v1/me/favorites/{type}/{id}": ([401, 204, 204, 204, 204], { world, caller in try await world.favorite(caller) }),
            "GET /v1/me/favorites": (members(200), { _, _ in Call(path: "/v1/me/favorites") }),
            "GET /v1/me/up-next": (members(200), { _, _ in Call(path: "/v1/me/up-next") }),
            "GET /v1/me/export": (members(200), { _, _ in Call(path: "/v1/me/export") }),
            "GET /v1/me/changes": (members(200), { _, _ in Call(path: "/v1/me/changes") }),
            "PUT /v1/me/ratings/{playableItemId}": (members(200), { world, _ in Call(path: "/v1/me/ratings/\(world.item)", body: ["rating": "like"]) }),
            "GET /v1/me/ratings/{playableItemId}": (members(200), { world, _ in Call(path: "/v1/me/ratings/\(world.item)") }),
            // Anyone who reads items reports views.
            "POST /v1/playable-items/{id}/views": (
                same(200), { world, _ in Call(path: "/v1/playable-items/\(world.item)/views", body: ["sessionId": "s", "positionSeconds": 40]) }
            ),

            "GET /v1/webhooks": (admins(200), { _, _ in Call(path: "/v1/webhooks") }),
            "POST /v1/webhooks": (admins(201), { _, _ in Call(path: "/v1/webhooks", body: ["url": "https://receiver.invalid/new"]) }),
            "GET /v1/webhooks/{id}": (admins(200), { world, _ in Call(path: "/v1/webhooks/\(world.webhook)") }),
            "PATCH /v1/webhooks/{id}": (
                admins(200), { world, _ in Call(path: "/v1/webhooks/\(world.webhook)", body: ["description": "Edited"], contentType: "application/merge-patch+json") }
            ),
            "DELETE /v1/webhooks/{id}": (admins(204), { world, _ in Call(path: "/v1/webhooks/\(try await World.webhook(world.catalog))") }),
            "POST /v1/webhooks/{id}/rotate-secret": (admins(200), { world, _ in Call(path: "/v1/webhooks/\(world.webhook)/rotate-secret") }),
            "GET /v1/webhooks/{id}/deliveries": (admins(200), { world, _ in Call(path: "/v1/webhooks/\(world.webhook)/deliveries") }),
            "GET /v1/webhooks/{id}/deliveries/{deliveryId}": (
                admins(200), { world, _ in Call(path: "/v1/webhooks/\(world.webhook)/deliveries/\(world.delivery)") }
            ),
            "POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry": (
                admins(202), { world, _ in Call(path: "/v1/webhooks/\(world.webhook)/deliveries/\(world.delivery)/retry") }
            ),

            "GET /v1/api-keys": (members(200), { _, _ in Call(path: "/v1/api-keys") }),
            "POST /v1/api-keys": (members(201), { _, _ in Call(path: "/v1/api-keys", body: ["name": "script"]) }),
            // Someone else's key does not exist for a member or an editor.
            "GET /v1/api-keys/{id}": ([401, 200, 404, 404, 200], { world, _ in Call(path: "/v1/api-keys/\(world.ownerKeyID)") }),
            "DELETE /v1/api-keys/{id}": (
                [401, 204, 404, 404, 204],
                { world, _ in
                    Call(path: "/v1/api-keys/\(try await world.ownerAPI.apiKeys.create(APIKeyInput(name: "Doomed")).key.id)")
                }
            ),
        ]
        // The catalog proper: anyone reads, editors write.
        let bodies: [(path: String, body: [String: Any])] = [
            ("/v1/playable-items", ["title": "T", "streamURL": "https://example.com/t"]),
            ("/v1/games", ["name": "G", "imageName": "g"]),
            ("/v1/locations", ["name": "L", "countryCode": "FR", "latitude": 1, "longitude": 2]),
        ]
        for (path, body) in bodies {
            func fresh(_ world: World) async throws -> String {
                let created = try await world.catalog.client.send("POST", path, json: body)
                return "\(path)/\(try created.decode(Identified.self).id)"
            }
            rows["GET \(path)"] = (same(200), { _, _ in Call(path: path) })
            rows["POST \(path)"] = (editors(201), { _, _ in Call(path: path, body: body) })
            rows["GET \(path)/{id}"] = (same(200), { world, _ in Call(path: try await fresh(world)) })
            rows["PUT \(path)/{id}"] = (editors(200), { world, _ in Call(path: try await fresh(world), body: body) })
            rows["PATCH \(path)/{id}"] = (editors(200), { world, _ in Call(path: try await fresh(world), body: [:], contentType: patch) })
            rows["DELETE \(path)/{id}"] = (editors(204), { world, _ in Call(path: try await fresh(world)) })
            if path != "/v1/locations" {
                rows["PUT \(path)/{id}/image"] = (editors(200), { world, _ in upload(try await fresh(world) + "/image") })
                rows["DELETE \(path)/{id}/image"] = (editors(204), { world, _ in Call(path: try await fresh(world) + "/image") })
            }
        }
        return rows
    }

    struct Identified: Decodable { let id: CatalogID }

    @Test(arguments: TestEngine.all) func everyRouteAnswersEachCallerAsExpected(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let world = try await World()
            let routes = world.catalog.application.routeTable.map { "\($0.method) \($0.pattern)" }
            let matrix = Self.matrix()
            #expect(
                Set(routes) == Set(matrix.keys),
                "routes without a row: \(Set(routes).subtracting(matrix.keys).sorted()); rows without a route: \(Set(matrix.keys).subtracting(routes).sorted())")
            for route in routes.sorted() {
                guard let row = matrix[route] else { continue }
                let method = String(route.prefix { $0 != " " })
                for caller in Caller.allCases {
                    let call = try await row.call(world, caller)
                    // In process: the matrix is about the application's rules, not the wire.
                    let client = APIClient(inProcess: world.catalog.application.server, key: call.key ?? world.key(caller))
                    let response =
                        if let data = call.data {
                            try await client.send(method, call.path, headers: call.headers.merging(["Content-Type": call.contentType]) { $1 }, body: Data(data))
                        } else if let body = call.body {
                            try await client.send(method, call.path, json: body, contentType: call.contentType)
                        } else {
                            try await client.send(method, call.path, headers: call.headers)
                        }
                    let expected = row.expected[caller.rawValue]
                    #expect(response.status == expected, "\(route) as \(caller): \(response.status) \(response.text.prefix(300))")
                    #expect(response.header("Cache-Control") != nil, "\(route) as \(caller) says how it may be cached")
                    // A HEAD answer has no body to name its problem.
                    if expected == 401 {
                        #expect(response.header("WWW-Authenticate") == "Bearer realm=\"catalog\"", "\(route) as \(caller)")
                        if method != "HEAD" { #expect(response.problem?.code == "unauthenticated") }
                    } else if expected == 403 {
                        #expect(response.header("WWW-Authenticate") == "Bearer realm=\"catalog\", error=\"insufficient_scope\"", "\(route) as \(caller)")
                        if method != "HEAD" { #expect(response.problem?.code == "forbidden") }
                    }
                }
            }
        }
    }
}
