import CCurl
import CatalogIdentity
import Foundation

/// Media kept in an S3-compatible bucket (AWS S3, SeaweedFS, MinIO, …), for servers that
/// share one database: each key an object, written whole by one `PUT` (S3 never shows a
/// partial object). Requests go through libcurl, which signs them with AWS Signature V4
/// (`CURLOPT_AWS_SIGV4`) and verifies TLS with the system's trust store; each carries its
/// body's SHA-256 (`x-amz-content-sha256`), so the store refuses a body changed on the way.
package struct S3MediaStore: MediaStore {
    /// Where the bucket is, parsed from `s3://bucket[/prefix]?endpoint=…&region=…`.
    package struct Address: Sendable, Equatable {
        package var bucket: String
        /// Keys are kept under this prefix (empty, or ending in `/`).
        package var prefix: String
        /// The service's base URL; AWS's regional endpoint when not given.
        package var endpoint: String
        /// The base URL players reach the service at, for presigned URLs (`public-endpoint`):
        /// ``endpoint`` when not given.
        package var publicEndpoint: String
        package var region: String

        /// The address `text` names, or why it is not one.
        package init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(MediaStoreError) {
            guard let components = URLComponents(string: text), components.scheme == "s3", let bucket = components.host, !bucket.isEmpty else {
                throw MediaStoreError("A media store is s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION, not \(text).")
            }
            let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
            if let unknown = query.keys.first(where: { !["endpoint", "region", "public-endpoint"].contains($0) }) {
                throw MediaStoreError("The media store's address takes endpoint, region and public-endpoint, not \(unknown).")
            }
            self.bucket = bucket
            let path = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            prefix = path.isEmpty ? "" : path + "/"
            region = query["region"] ?? environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"] ?? "us-east-1"
            endpoint = query["endpoint"] ?? "https://s3.\(region).amazonaws.com"
            guard let url = URL(string: endpoint), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw MediaStoreError("The media store's endpoint must be an http(s) URL, not \(endpoint).")
            }
            endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
            publicEndpoint = query["public-endpoint"] ?? endpoint
            guard let url = URL(string: publicEndpoint), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw MediaStoreError("The media store's public-endpoint must be an http(s) URL, not \(publicEndpoint).")
            }
            publicEndpoint = publicEndpoint.hasSuffix("/") ? String(publicEndpoint.dropLast()) : publicEndpoint
        }
    }

    package let address: Address
    /// `key:secret`, for libcurl's signature.
    let credentials: String
    let sessionToken: String?
    /// How long one exchange may take.
    let timeoutMilliseconds: Int

    /// The store at `address`, with credentials from the usual variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`).
    package init(
        _ address: Address, environment: [String: String] = ProcessInfo.processInfo.environment, timeout: Duration = .seconds(30)
    )
        throws(MediaStoreError)
    {
        guard let key = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"], !key.isEmpty, !secret.isEmpty else {
            throw MediaStoreError("An S3 media store needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.")
        }
        guard ccurl_start() == 0 else { throw MediaStoreError("libcurl (libcurl.so.4, Debian's libcurl4) cannot be loaded.") }
        self.address = address
        credentials = key + ":" + secret
        sessionToken = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        timeoutMilliseconds = Int(timeout.components.seconds * 1000)
    }

    package var location: String { "s3://\(address.bucket)/\(address.prefix) at \(address.endpoint)" }

    package func put(_ key: String, _ bytes: [UInt8]) throws(MediaStoreError) {
        let answer = try exchange("PUT", path: objectPath(key), body: bytes, headers: ["Content-Type: application/octet-stream"])
        guard (200..<300).contains(answer.status) else { throw failure("PUT", key, answer) }
    }

    package func get(_ key: String, limit: Int) throws(MediaStoreError) -> [UInt8]? {
        let answer = try exchange("GET", path: objectPath(key), limit: limit)
        if answer.status == 404 { return nil }
        guard answer.status == 200 else { throw failure("GET", key, answer) }
        guard !answer.truncated else { throw MediaStoreError("\(key) holds more than \(limit) bytes") }
        return answer.body
    }

    package func delete(_ key: String) throws(MediaStoreError) {
        let answer = try exchange("DELETE", path: objectPath(key))
        guard (200..<300).contains(answer.status) || answer.status == 404 else { throw failure("DELETE", key, answer) }
    }

    package func list(prefix: String) throws(MediaStoreError) -> [(key: String, modified: Int64)] {
        var found: [(key: String, modified: Int64)] = []
        var token: String?
        repeat {
            // In name order, as SigV4's canonical query is (libcurl 7.88 signs it as given).
            var query = "list-type=2&prefix=" + Self.escape(address.prefix + prefix)
            if let token { query = "continuation-token=" + Self.escape(token) + "&" + query }
            let answer = try exchange("GET", path: "/\(address.bucket)/?\(query)", limit: 16 << 20)
            guard answer.status == 200, !answer.truncated else { throw failure("LIST", prefix, answer) }
            let page = ListPage(String(decoding: answer.body, as: UTF8.self))
            found += page.objects.compactMap { object in
                guard object.key.hasPrefix(address.prefix) else { return nil }
                return (String(object.key.dropFirst(address.prefix.count)), object.modified)
            }
            token = page.nextToken
        } while token != nil
        return found
    }

    /// Creates the bucket when it does not exist (for tests and first runs), and returns once
    /// it takes objects: a store may answer 409 to a creation another client's is still
    /// making (SeaweedFS does), whose bucket is not yet there for a moment.
    package func createBucket() throws(MediaStoreError) {
        let answer = try exchange("PUT", path: "/\(address.bucket)", body: [])
        guard (200..<300).contains(answer.status) || answer.status == 409 else { throw failure("PUT", address.bucket, answer) }
        var found = try exchange("HEAD", path: "/\(address.bucket)")
        for _ in 0..<50 where found.status == 404 {
            usleep(100_000)
            found = try exchange("HEAD", path: "/\(address.bucket)")
        }
        guard (200..<300).contains(found.status) else { throw failure("HEAD", address.bucket, found) }
    }

    /// A URL that lets whoever holds it `GET` `key` for `lifetime` seconds (AWS Signature V4
    /// in the query, path-style, signed for the host alone: `UNSIGNED-PAYLOAD`), at the
    /// address players reach the store at (``Address/publicEndpoint``).
    package func presignedGET(_ key: String, lifetime: Int, now: Date = Date()) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let stamp = formatter.string(from: now)
        let day = String(stamp.prefix(8))
        let (keyID, secret) = credentials.split(separator: ":", maxSplits: 1).map(String.init).splitPair
        let scope = "\(day)/\(address.region)/s3/aws4_request"
        var query = [
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"), ("X-Amz-Credential", keyID + "/" + scope), ("X-Amz-Date", stamp),
            ("X-Amz-Expires", String(lifetime)), ("X-Amz-SignedHeaders", "host"),
        ]
        if let sessionToken { query.append(("X-Amz-Security-Token", sessionToken)) }
        let canonicalQuery = query.map { (Self.escape($0.0), Self.escape($0.1)) }.sorted { $0.0 < $1.0 }.map { $0.0 + "=" + $0.1 }.joined(separator: "&")
        let url = URL(string: address.publicEndpoint)
        // The Host a client sends: no port when it is the scheme's own.
        let port = url?.port.flatMap { ($0 == 443 && url?.scheme == "https") || ($0 == 80 && url?.scheme == "http") ? nil : $0 }
        let host = (url?.host ?? "") + (port.map { ":\($0)" } ?? "")
        let base = url?.path ?? ""
        let path = (base.hasSuffix("/") ? String(base.dropLast()) : base) + objectPath(key)
        let canonicalRequest = "GET\n\(path)\n\(canonicalQuery)\nhost:\(host)\n\nhost\nUNSIGNED-PAYLOAD"
        let stringToSign = "AWS4-HMAC-SHA256\n\(stamp)\n\(scope)\n" + Crypto.hex(Crypto.sha256(Array(canonicalRequest.utf8)))
        var signingKey = Crypto.hmacSHA256(key: Array(("AWS4" + secret).utf8), Array(day.utf8))
        for part in [address.region, "s3", "aws4_request"] { signingKey = Crypto.hmacSHA256(key: signingKey, Array(part.utf8)) }
        let signature = Crypto.hex(Crypto.hmacSHA256(key: signingKey, Array(stringToSign.utf8)))
        return (url?.scheme ?? "https") + "://" + host + path + "?" + canonicalQuery + "&X-Amz-Signature=" + signature
    }

    func objectPath(_ key: String) -> String {
        "/\(address.bucket)/" + (address.prefix + key).split(separator: "/", omittingEmptySubsequences: false).map { Self.escape(String($0)) }.joined(separator: "/")
    }

    /// RFC 3986 unreserved characters kept, everything else percent-encoded (as SigV4 wants).
    static func escape(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    struct Answer {
        let status: Int
        let body: [UInt8]
        let truncated: Bool
        /// The answer's `ETag`, quotes included (empty when none).
        let etag: String
    }

    /// How long moving `bytes` may take: the usual bound, and a second for each megabyte
    /// (a transfer slower than 1 MB/s is given up).
    func timeout(forBytes bytes: Int) -> Int {
        timeoutMilliseconds + bytes / 1000
    }

    /// A body read from a file: `length` bytes of `descriptor` from `offset`, whose SHA-256
    /// (hex) is `sha256`.
    struct FileBody {
        let descriptor: Int32
        let offset: Int
        let length: Int
        let sha256: String
    }

    func exchange(
        _ method: String, path: String, body: [UInt8] = [], file: FileBody? = nil, download: Int32 = -1, limit: Int = 64 << 10, headers: [String] = [],
        timeout: Int? = nil
    ) throws(MediaStoreError)
        -> Answer
    {
        var lines = headers + ["x-amz-content-sha256: " + (file?.sha256 ?? Crypto.hex(Crypto.sha256(body)))]
        if let sessionToken { lines.append("x-amz-security-token: " + sessionToken) }
        // No `Expect:` to turn off libcurl's `100-continue`: libcurl 7.88 signs the empty field
        // it then does not send, and the store refuses the signature.
        let sigv4 = "aws:amz:\(address.region):s3"
        var response = ccurl_response()
        let cLines = lines.map { strdup($0) }
        defer {
            for line in cLines { free(line) }
        }
        let status = cLines.map { UnsafePointer($0) }.withUnsafeBufferPointer { headerPointers in
            body.withUnsafeBufferPointer { bodyPointer in
                ccurl_perform_files(
                    method, address.endpoint + path, sigv4, credentials, headerPointers.baseAddress, headerPointers.count, bodyPointer.baseAddress,
                    file?.descriptor ?? -1, Int64(file?.offset ?? 0), file?.length ?? bodyPointer.count, download, limit, timeout ?? timeoutMilliseconds, &response)
            }
        }
        defer { ccurl_response_free(&response) }
        guard status == 0 else {
            let reason = withUnsafeBytes(of: response.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw MediaStoreError("\(method) \(path) at \(address.endpoint) failed: \(reason)")
        }
        let bytes = response.body.map { Array(UnsafeBufferPointer(start: $0, count: response.body_length)) } ?? []
        let etag = withUnsafeBytes(of: response.etag) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return Answer(status: response.status, body: download >= 0 && (200..<300).contains(response.status) ? [] : bytes, truncated: response.truncated != 0, etag: etag)
    }

    func failure(_ operation: String, _ key: String, _ answer: Answer) -> MediaStoreError {
        let code = ListPage.element("Code", in: String(decoding: answer.body.prefix(4096), as: UTF8.self)).first ?? ""
        return MediaStoreError("\(operation) \(key) answered \(answer.status) \(code)")
    }
}

/// One page of a `ListObjectsV2` answer: the objects' keys and times, and the token of the next page.
struct ListPage {
    var objects: [(key: String, modified: Int64)] = []
    var nextToken: String?

    init(_ xml: String) {
        for contents in Self.element("Contents", in: xml) {
            guard let key = Self.element("Key", in: contents).first.map(Self.unescape) else { continue }
            let modified = Self.element("LastModified", in: contents).first.flatMap(Self.date).map { Int64($0.timeIntervalSince1970 * 1000) } ?? 0
            objects.append((key, modified))
        }
        if Self.element("IsTruncated", in: xml).first == "true" { nextToken = Self.element("NextContinuationToken", in: xml).first.map(Self.unescape) }
    }

    /// The texts of the elements `name` in `xml` (S3's answers nest no element in itself).
    static func element(_ name: String, in xml: String) -> [String] {
        var found: [String] = []
        var rest = xml[...]
        while let open = rest.range(of: "<\(name)>"), let close = rest.range(of: "</\(name)>", range: open.upperBound..<rest.endIndex) {
            found.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return found
    }

    static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&apos;", with: "'").replacingOccurrences(of: "&amp;", with: "&")
    }

    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}

extension Array where Element == String {
    /// The first two elements (empty strings for those missing).
    fileprivate var splitPair: (String, String) {
        (first ?? "", count > 1 ? self[1] : "")
    }
}
