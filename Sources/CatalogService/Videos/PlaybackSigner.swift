import CatalogIdentity
import CatalogSchema
import Foundation
import HTTPServer
import Synchronization

/// Signed playback (`--require-signed-playback`): every media path a response shows
/// (`/v1/videos/{id}/media/…`, in `video` and in a hosted item's stream URL) carries an
/// expiring signature in place of `media`, `/v1/videos/{id}/{token}/…`, and a file is
/// served only under a valid one (403 otherwise). The token signs the video and its
/// expiry with HMAC-SHA-256 under the server's key, so every path under it (an HLS
/// playlist's relative segments included) shares it, and a URL copied out of an app stops
/// working once it expires.
///
/// Tokens expire on a grid of a quarter of their lifetime, between one and one and a
/// quarter lifetimes after they are made: every response within a quarter shows the same
/// ones, so rendered documents stay the same for that long (their tags change with the
/// quarter). The key is read from a file (the same on every replica), or made at start
/// when none is given; SIGHUP reads it again (or makes a new one) and keeps the previous
/// one valid, so a rotation breaks no URL already handed out.
final class PlaybackSigner: Sendable {
    /// Whether media files need a token (else `media` paths are served as they are, and
    /// tokens still work).
    let required: Bool
    /// How long a token lasts at least, in seconds.
    let lifetime: Int
    private let keyFile: String?
    private let keys: Mutex<(current: [UInt8], previous: [UInt8]?)>

    /// The least a key file holds.
    static let minimumKeyBytes = 32

    /// What may stand right before a media path the server wrote: the `video` member's
    /// paths, and a hosted item's stream URL (at the server's public URL). Text a client
    /// wrote is JSON-escaped, so it never holds `":"` unescaped: no path in it is signed.
    private let prefixes: [[UInt8]]

    init(required: Bool, keyFile: String?, lifetime: Int, publicURL: String?) throws {
        self.required = required
        self.keyFile = keyFile
        self.lifetime = max(60, lifetime)
        keys = Mutex((try Self.load(keyFile), nil))
        prefixes = VideoMember.writtenPathPrefixes(publicURL: publicURL).map { Array($0.utf8) }
    }

    /// The key in `file`, or a new random one.
    private static func load(_ file: String?) throws -> [UInt8] {
        guard let file else { return try Crypto.randomBytes(32) }
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
        guard bytes.count >= minimumKeyBytes else {
            throw APIError(
                status: .internalServerError, code: "playbackKeyTooShort", detail: "The playback key file \(file) holds fewer than \(minimumKeyBytes) bytes.")
        }
        return bytes
    }

    /// Reads the key again (SIGHUP), keeping the one in use valid as the previous key.
    func rotate() throws {
        let next = try Self.load(keyFile)
        keys.withLock { keys in keys = (next, keys.current) }
    }

    /// The quarter of a lifetime `now` falls in.
    func window(_ now: Int) -> Int { now / (lifetime / 4) }

    /// The token of video `id` expiring at `expires` (seconds since 1970), under `key`.
    private static func token(_ id: String, expires: Int, key: [UInt8]) -> String {
        let mac = Crypto.hmacSHA256(key: key, Array("\(id).\(expires)".utf8)).prefix(18)
        return "s\(expires)." + Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    /// The token of video `id` for responses made at `now`.
    func token(_ id: String, now: Int) -> String {
        Self.token(id, expires: (window(now) + 5) * (lifetime / 4), key: keys.withLock { $0.current })
    }

    /// Whether `token` is valid for video `id` at `now`: not expired, and signed by the
    /// key in use or the one before it. - Returns: when it expires, if it is valid.
    func check(_ token: String, id: String, now: Int) -> Int? {
        guard token.hasPrefix("s"), let dot = token.firstIndex(of: "."), let expires = Int(token[token.index(after: token.startIndex)..<dot]),
            expires > now, expires <= now + 2 * lifetime
        else { return nil }
        let (current, previous) = keys.withLock { ($0.current, $0.previous) }
        let given = Array(token.utf8)
        for key in [current] + (previous.map { [$0] } ?? []) where Crypto.constantTimeEqual(Array(Self.token(id, expires: expires, key: key).utf8), given) {
            return expires
        }
        return nil
    }

    private static let marker = Array("/v1/videos/".utf8)
    private static let media = Array("/media/".utf8)

    /// `body` with each media path the server wrote (``prefixes``) signed for responses
    /// made at `now`; `nil` when it shows none.
    func sign(_ body: [UInt8], now: Int) -> [UInt8]? {
        var output: [UInt8] = []
        var copied = 0
        var index = 0
        var tokens: [String: [UInt8]] = [:]
        let idLength = 32
        while let found = Self.find(Self.marker, in: body, from: index) {
            let idStart = found + Self.marker.count, mediaStart = idStart + idLength
            index = idStart
            guard prefixes.contains(where: { found >= $0.count && body[(found - $0.count)..<found].elementsEqual($0) }),
                mediaStart + Self.media.count <= body.count, body[mediaStart..<(mediaStart + Self.media.count)].elementsEqual(Self.media),
                body[idStart..<mediaStart].allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            else { continue }
            let id = String(decoding: body[idStart..<mediaStart], as: UTF8.self)
            let token = tokens[id] ?? Array(self.token(id, now: now).utf8)
            tokens[id] = token
            if output.isEmpty { output.reserveCapacity(body.count + 256) }
            output += body[copied..<(mediaStart + 1)]
            output += token
            copied = mediaStart + Self.media.count - 1
            index = copied
        }
        guard copied > 0 else { return nil }
        output += body[copied...]
        return output
    }

    /// Where `needle` first occurs in `haystack` from `start`.
    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard let first = needle.first, haystack.count - start >= needle.count else { return nil }
        return haystack.withUnsafeBufferPointer { hay in
            var index = start
            let last = hay.count - needle.count
            while index <= last {
                if hay[index] == first, needle.indices.allSatisfy({ hay[index + $0] == needle[$0] }) { return index }
                index += 1
            }
            return nil
        }
    }
}
