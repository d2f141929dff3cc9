/// The secret of an API key: `catalog_` and 43 base64url characters holding 256 bits
/// from `RAND_bytes`. The prefix makes a leaked key easy to recognise (and to scan
/// for); the server keeps only its SHA-256 digest and the first ``displayedLength``
/// characters, to tell keys apart in listings.
public struct APIKeySecret: Sendable {
    /// What every key starts with.
    public static let prefix = "catalog_"
    /// How many characters of a key its listing shows.
    public static let displayedLength = 16
    /// The length of a well-formed key.
    public static let length = prefix.utf8.count + 43

    /// The secret, shown once.
    public let text: String

    /// A new random key.
    public init() throws(Crypto.Failure) {
        text = Self.prefix + Base64URL.encode(try Crypto.randomBytes(32))
    }

    /// What listings show of the key: its first characters.
    public var displayed: String { String(text.prefix(Self.displayedLength)) }

    /// The digest the server stores and looks keys up by.
    public var digest: [UInt8] { Self.digest(of: Array(text.utf8)) }

    /// The digest of a presented key.
    public static func digest(of presented: [UInt8]) -> [UInt8] { Crypto.sha256(presented) }

    /// Whether `token` has the shape of a key (not whether it is one).
    public static func looksLikeKey(_ token: some Collection<UInt8>) -> Bool {
        token.count == length && token.starts(with: prefix.utf8)
    }
}
