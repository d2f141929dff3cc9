import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// The routes of images: `PUT` and `DELETE …/{id}/image` on every resource that declares
/// one (``ResourceSchema/image``), and `GET /v1/images/{hash}` with its renditions.
struct ImageEndpoints: Sendable {
    let library: ImageLibrary
    let records: ImageRecords
    /// Whether reads need a credential (`--require-auth-for-reads`): images are then
    /// `private` to caches too.
    let privateReads: Bool

    /// The most bytes of images a member's uploads may hold (editors and admins are not limited).
    let memberQuota: Int

    // MARK: Uploads

    /// `PUT` and `DELETE path/{id}/image` for the resource `endpoints` serves.
    func registerUploads(for endpoints: ResourceEndpoints, in routes: inout Routes) {
        guard let slot = endpoints.store.schema.image else { return }
        let path = endpoints.path + "/{id}/image"
        let access: Access = slot.setters == .itself ? .member : endpoints.writers
        let mayChange: @Sendable (CatalogID, Caller) throws -> Void = { id, caller in
            switch slot.setters {
            case .editors: try endpoints.checkMayChange(id, caller)
            case .itself:
                guard caller.is(id) || caller.has(.admin) else { throw APIError.forbidden("Only the user and admins may change a user's \(slot.name).") }
            }
        }
        routes.add(
            .PUT, path, access, rate: .expensive, maxBody: ImageRules.maxBytes, bodyPassesServerLimit: true,
            endpoints.write { [self] request, caller, options, done in
                let id = try ResourceEndpoints.id(request)
                try mayChange(id, caller)
                let preconditions = try ETag.preconditions(request)
                let declared = try Self.declaredFormat(request)
                let quota = caller.has(.editor) ? nil : memberQuota
                try ingest(request, declared: declared, verbatim: false, uploader: caller.userID, quota: quota, line: RateLimiter.partition(caller, request), done) {
                    reference, done in
                    endpoints.store.setImage(id, to: reference, preconditions: preconditions, options: options) { done(ResourceEndpoints.updated($0, in: endpoints.store.schema)) }
                }
            })
        routes.add(
            .DELETE, path, access,
            endpoints.write { request, caller, options, done in
                let id = try ResourceEndpoints.id(request)
                try mayChange(id, caller)
                endpoints.store.setImage(id, to: nil, preconditions: try ETag.preconditions(request), options: options) { result in
                    done(result.map { HTTPResponse(status: .noContent, headers: [("ETag", ETag.header($0.version))]) })
                }
            })
    }

    /// `PUT /admin/images/{hash}`: an original from another catalog (an export's), kept as
    /// it is once it passes what an upload passes and decodes whole, so records naming it
    /// can be imported (`catalog import --images`).
    func registerImports(in routes: inout Routes) {
        routes.add(
            .PUT, "/admin/images/{hash}", .admin, rate: .expensive, maxBody: ImageRules.maxBytes, bodyPassesServerLimit: true,
            .later { [self] request, caller, _, done in
                let hash = request.pathParameters["hash"] ?? ""
                guard ImageMember.isHash(hash) else { throw APIError.invalidHash }
                let declared = try Self.declaredFormat(request)
                guard Crypto.hex(Crypto.sha256(request.body)) == hash else {
                    throw APIError(status: .unprocessableContent, code: "hashMismatch", detail: "The body's SHA-256 is not the hash the path names.")
                }
                try ingest(request, declared: declared, verbatim: true, uploader: nil, quota: nil, line: RateLimiter.partition(caller, request), done) {
                    reference, done in
                    done(Result { HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType)], body: Array(try JSONResponse.encoder.encode(reference))) })
                }
            })
    }

    /// Takes in the image the request's body is: checked and normalized (or, `verbatim`,
    /// checked and decoded whole), recorded (`uploader`'s, within `quota`; the sweep then leaves it be),
    /// kept, and only then handed to `show`: a crash between two steps leaves an image
    /// nothing shows, never a resource showing an image that is not there. Each step's
    /// failure, and a full pool, answers through `done`. The body counts against the
    /// uploads held at once (``ImageLibrary/maxUploadBytes``: 503 beyond) until answered.
    private func ingest(
        _ request: HTTPRequest, declared: ImageFormat, verbatim: Bool, uploader: CatalogID?, quota: Int?, line: String, _ answer: @escaping Completion,
        show: @escaping @Sendable (ImageReference, @escaping Completion) -> Void
    ) throws {
        let bytes = request.body.count
        guard library.reserve(upload: bytes) else { throw WorkPool.busy }
        let done: Completion = { [library] result in
            library.release(upload: bytes)
            answer(result)
        }
        let queued = library.normalize(request.body, declared: declared, verbatim: verbatim, for: line) { [library, records] normalized in
            guard case let .success(image) = normalized else { return done(normalized.map { _ in HTTPResponse(status: .ok) }) }
            let reference = ImageReference(
                url: ImageMember.path + image.hash, width: image.width, height: image.height, blurHash: image.blurHash, contentType: image.format.contentType)
            records.record(reference, ImageUpload(byteSize: image.bytes.count, uploader: uploader, quota: quota)) { recorded in
                guard case .success = recorded else { return done(recorded.map { HTTPResponse(status: .ok) }) }
                let kept = library.keep(image, for: line) { kept in
                    guard case .success = kept else { return done(kept.map { HTTPResponse(status: .ok) }) }
                    show(reference, done)
                }
                if !kept { done(.failure(WorkPool.busy)) }
            }
        }
        guard queued else {
            library.release(upload: bytes)
            throw WorkPool.busy
        }
    }

    /// The format the request's `Content-Type` names; 415 for anything else.
    static func declaredFormat(_ request: HTTPRequest) throws(APIError) -> ImageFormat {
        guard let field = request.headers["content-type"], let format = ImageFormat(contentType: field) else {
            throw APIError(
                status: .unsupportedMediaType, code: "unsupportedMediaType",
                detail: "An image is sent as its bytes with Content-Type image/jpeg, image/png, image/webp, image/heic or image/avif.")
        }
        return format
    }

    // MARK: Serving

    /// `GET /v1/images/{hash}`: the original, or a rendition (`w`, `h`, `fit`, `format`, `q`).
    func registerServing(in routes: inout Routes) {
        routes.add(
            .GET, ImageMember.path + "{hash}", .read, usesDatabase: false,
            .inlineOrLater(
                // Making a rendition (or fetching an original from the store) is expensive; a
                // cached one is a read. A request that is not one (a 400) costs a read.
                isExpensive: { [library] request in (try? Self.parse(request)).map { !library.isCached($0.0, $0.1) } ?? false }
            ) { [self] request, caller, done in
                let (hash, spec, negotiated) = try Self.parse(request)
                if let served = library.cached(hash, spec) { return try response(served, hash: hash, spec: spec, negotiated: negotiated, request) }
                library.rendition(hash, spec, for: RateLimiter.partition(caller, request)) { result in
                    done(
                        result.flatMap { served in
                            Result {
                                guard let served else { throw APIError(status: .notFound, code: "notFound", detail: "No image has this hash.") }
                                return try response(served, hash: hash, spec: spec, negotiated: negotiated, request)
                            }
                        })
                }
                return nil
            })
    }

    /// The image's hash and the rendition the query asks for (`nil`: the original), and
    /// whether its format was negotiated (`format=auto`).
    static func parse(_ request: HTTPRequest) throws(APIError) -> (String, RenditionSpec?, Bool) {
        let hash = request.pathParameters["hash"] ?? ""
        guard ImageMember.isHash(hash) else { throw APIError.invalidHash }
        guard request.query != nil else { return (hash, nil, false) }
        let values = try QueryParameters.parse(request, accepted: Self.parameters)
        func side(_ name: String) throws(APIError) -> Int? {
            guard let text = values[name] else { return nil }
            guard let value = number(text), ImageRules.widths.contains(value) else {
                throw .invalidParameter(name, "must be one of \(Self.ladder): renditions come in these sizes only.")
            }
            return value
        }
        let width = try side("w"), height = try side("h")
        var fit = ImageFit.contain
        if let text = values["fit"] {
            guard let value = ImageFit(rawValue: text) else { throw .invalidParameter("fit", "must be contain or cover.") }
            // Cropping needs both sides; with one, the rendition is the same either way (and one cache entry).
            if width != nil, height != nil { fit = value }
        }
        var quality = ImageRules.defaultQuality
        if let text = values["q"] {
            guard let value = number(text), ImageRules.qualities.contains(value) else {
                throw .invalidParameter("q", "must be one of \(ImageRules.qualities.map(String.init).joined(separator: ", ")).")
            }
            quality = value
        }
        var format = ImageFormat.jpeg
        var negotiated = false
        if let text = values["format"] {
            if text == "auto" {
                negotiated = true
                format = negotiate(request.headers["accept"] ?? "")
            } else {
                guard let value = ImageFormat(rawValue: text), ImageFormat.renditions.contains(value) else {
                    throw .invalidParameter("format", "must be jpeg, webp, avif or auto.")
                }
                format = value
            }
        }
        // A side not asked for is bounded by the ladder's largest: no request re-encodes a
        // 40-megapixel original whole.
        let largest = ImageRules.widths[ImageRules.widths.count - 1]
        return (hash, RenditionSpec(width: width ?? largest, height: height ?? largest, fit: fit, format: format, quality: quality), negotiated)
    }

    /// The parameters of a rendition.
    private static let parameters: Set<String> = ["w", "h", "fit", "format", "q"]
    /// The ladder of sizes, as a 400 names it.
    private static let ladder = ImageRules.widths.map(String.init).joined(separator: ", ")

    /// `text` as a number written as the ladders write them (digits, no leading zero); `nil` otherwise.
    private static func number(_ text: String) -> Int? {
        guard let first = text.utf8.first, first != UInt8(ascii: "0"), text.utf8.count <= 4,
            text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return Int(text)
    }

    /// The best format `accept` takes: AVIF, then WebP, then JPEG (which every client takes).
    /// A type with `q=0` is refused.
    static func negotiate(_ accept: String) -> ImageFormat {
        var types: Set<String> = []
        for item in accept.lowercased().split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            let refused = parts.dropFirst().contains { parameter in
                parameter.hasPrefix("q=") && (Double(parameter.dropFirst(2)) ?? 1) == 0
            }
            if !refused, let type = parts.first { types.insert(type) }
        }
        if types.contains("image/avif") { return .avif }
        if types.contains("image/webp") { return .webp }
        return .jpeg
    }

    /// The answer serving `served`: immutable when its format was asked for, an hour's
    /// `max-age` varying by `Accept` when negotiated; never anything a browser would run.
    private func response(
        _ served: ImageLibrary.Served, hash: String, spec: RenditionSpec?, negotiated: Bool, _ request: HTTPRequest
    ) throws
        -> HTTPResponse
    {
        let tag = "\"" + hash.prefix(32) + "-" + (spec?.name ?? "original") + "\""
        var headers: [(name: String, value: String)] = [
            ("ETag", tag), ("X-Content-Type-Options", "nosniff"), ("Content-Security-Policy", "default-src 'none'"),
        ]
        var vary = privateReads ? ["Authorization"] : []
        if negotiated { vary.append("Accept") }
        if !vary.isEmpty { headers.append(("Vary", vary.joined(separator: ", "))) }
        let scope = privateReads ? "private" : "public"
        let control = negotiated ? "\(scope), max-age=3600" : "\(scope), max-age=31536000, immutable"
        var response: HTTPResponse
        if try ETag.noneMatch(request.headers.values(for: "if-none-match"), tag: tag) {
            response = HTTPResponse(status: .notModified, headers: headers)
        } else {
            response = HTTPResponse(status: .ok, headers: [("Content-Type", served.format.contentType)] + headers, body: served.bytes)
        }
        response.cacheControl = control
        return response
    }
}

extension APIError {
    /// 400: a path's image hash that is not one.
    static let invalidHash = APIError(status: .badRequest, code: "invalidHash", detail: "An image is named by its SHA-256: 64 lowercase hexadecimal digits.")
}
