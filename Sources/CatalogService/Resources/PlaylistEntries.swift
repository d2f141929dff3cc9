import CatalogModels
import CatalogSchema
import CatalogStore
import HTTPServer

/// `/v1/playlists/{id}/entries`: the ordered entries of a playlist. Every change bumps
/// the playlist's version, answers with the playlist's new `ETag`, and honours
/// `If-Match` on the playlist, so two apps reordering one playlist cannot overwrite
/// each other's changes unseen. The entries of a private playlist are as hidden as the
/// playlist; only those who may change the playlist change its entries.
struct PlaylistEntries: Sendable {
    let store: PlaylistEntryStore
    let endpoints: ResourceEndpoints
    /// The fields of the embedded playable items, for `fields=…`.
    let itemFields: FieldSet

    func register(in routes: inout Routes) {
        let entries = "/v1/playlists/{id}/entries"
        let entry = entries + "/" + Self.entryParameter
        let writers = endpoints.writers
        routes.add(.GET, entries, .read, caching: .perCaller, .inline(list))
        routes.add(.POST, entries, writers, write(insert))
        // A whole order (up to 10,000 entries) spends from the expensive budget.
        routes.add(.PUT, entries, writers, rate: .expensive, maxBody: BodyLimits.unbounded, write(replace))
        routes.add(.GET, entry, .read, caching: .perCaller, .inline { [self] request, caller in try show(request, caller) { try store.entry($0, of: $1) } })
        routes.add(.PATCH, entry, writers, write(move))
        routes.add(.DELETE, entry, writers, write(remove))
        routes.add(
            .GET, entry + "/next", .read, caching: .perCaller,
            .inline { [self] request, caller in
                try show(request, caller) { entryID, playlistID in
                    switch try store.next(after: entryID, of: playlistID) {
                    case let .entry(next): next
                    case .endOfPlaylist: throw APIError.endOfPlaylist
                    }
                }
            })
    }

    // MARK: Reads

    private func list(_ request: HTTPRequest, _ caller: Caller) throws -> HTTPResponse {
        let id = try ResourceEndpoints.id(request)
        try endpoints.checkMaySee(id, caller)
        let values = try QueryParameters.parse(request, accepted: ["limit", "cursor", "fields"])
        let fields = try values["fields"].map { text throws(APIError) in try itemFields.parse(text) } ?? .all
        let page = try store.page(of: id, limit: ListParameters.limit(values), cursor: ListParameters.cursor(values), fields: fields)
        return ResourceEndpoints.page((page.json, page.nextCursor, nil), request: request)
    }

    /// One entry, tagged by the playlist's version and a digest of the entry (its item
    /// can change without the playlist changing).
    private func show(_ request: HTTPRequest, _ caller: Caller, _ read: (CatalogID, CatalogID) throws -> RenderedEntry?) throws -> HTTPResponse {
        let (playlistID, entryID) = try Self.ids(request)
        try endpoints.checkMaySee(playlistID, caller)
        _ = try QueryParameters.parse(request, accepted: [])
        guard let entry = try read(entryID, playlistID) else { throw APIError.notFound }
        let tag = ETag.header(entry.playlistVersion, body: entry.json)
        return HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType), ("ETag", tag)], body: entry.json)
    }

    // MARK: Writes

    /// A write of the playlist the path names, by those who may change it.
    private func write(_ body: @escaping @Sendable (HTTPRequest, WriteOptions, @escaping Completion) throws -> Void) -> Endpoint {
        endpoints.write { [endpoints] request, caller, options, done in
            try endpoints.checkMayChange(ResourceEndpoints.id(request), caller)
            try body(request, options, done)
        }
    }

    private func insert(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try ResourceEndpoints.id(request)
        let preconditions = try ETag.preconditions(request)
        let values = try RequestBody.values(request, PlaylistEntrySchema.insertion, mediaType: RequestBody.json)
        store.insert(values, into: id, preconditions: preconditions, options: options) { result in
            done(
                result.map { entry in
                    Self.response(entry, status: .created, headers: [("Location", "/v1/playlists/\(id)/entries/\(entry.entryID)")])
                })
        }
    }

    private func move(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let (playlistID, entryID) = try Self.ids(request)
        let preconditions = try ETag.preconditions(request)
        let values = try RequestBody.values(request, PlaylistEntrySchema.move, mediaType: RequestBody.mergePatch)
        store.move(entryID, of: playlistID, values, preconditions: preconditions, options: options) { done($0.map { Self.response($0) }) }
    }

    private func remove(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let (playlistID, entryID) = try Self.ids(request)
        let preconditions = try ETag.preconditions(request)
        store.remove(entryID, from: playlistID, preconditions: preconditions, options: options) { result in
            done(result.map { HTTPResponse(status: .noContent, headers: [("ETag", ETag.header($0))]) })
        }
    }

    private func replace(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try ResourceEndpoints.id(request)
        let preconditions = try ETag.preconditions(request)
        let values = try RequestBody.values(request, PlaylistEntrySchema.order, mediaType: RequestBody.json)
        store.replace(values, of: id, preconditions: preconditions, options: options) {
            done(ResourceEndpoints.updated($0, in: ResourceSchema.playlist))
        }
    }

    // MARK: Helpers

    /// The path parameter naming an entry, as openapi.yaml names it.
    private static let entryParameter = "{entryId}"

    private static func ids(_ request: HTTPRequest) throws(APIError) -> (CatalogID, CatalogID) {
        (
            try ResourceEndpoints.id(request),
            try ResourceEndpoints.id(request, String(entryParameter.dropFirst().dropLast()))
        )
    }

    /// An entry with the playlist's new version as its `ETag`.
    private static func response(_ entry: RenderedEntry, status: HTTPStatus = .ok, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", JSONResponse.contentType), ("ETag", ETag.header(entry.playlistVersion))] + headers,
            body: entry.json)
    }
}
