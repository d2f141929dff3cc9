import Foundation

/// One failing field of a request body, as listed in a 422 problem's `errors`.
public struct FieldError: Codable, Sendable, Hashable {
    /// A JSON Pointer (RFC 6901) to the field, such as `/title`.
    public var pointer: String
    /// A stable machine-readable code, one of ``Violation/Code``.
    public var code: String
    /// A human-readable explanation.
    public var message: String

    /// Creates a field error.
    public init(pointer: String, code: String, message: String) {
        self.pointer = pointer
        self.code = code
        self.message = message
    }
}

/// Why a value breaks a rule, before it is attached to a field.
public struct Violation: Error, Sendable, Hashable {
    /// The codes a violation can carry.
    public enum Code: String, Sendable {
        case required, tooShort, tooLong, invalidURL, outOfRange, invalidFormat, invalidType, unknownField, readOnly, notFound, invalidParent
    }

    /// The rule that was broken.
    public var code: Code
    /// A human-readable explanation.
    public var message: String

    /// Creates a violation.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// This violation attached to the field at `pointer`.
    public func at(_ pointer: String) -> FieldError {
        FieldError(pointer: pointer, code: code.rawValue, message: message)
    }
}

/// The validation rules shared by the server and its clients. Each returns `nil` when
/// the value is acceptable.
public enum Rules {
    /// The most UTF-8 bytes a text may spend per character of its limit: a text limited
    /// to 200 characters holds at most 800 bytes, so no limit can be met by a few
    /// characters that are each enormous.
    public static let maxBytesPerCharacter = 4

    /// The most combining marks one character may stack (Unicode general categories Mn,
    /// Mc and Me in a row). Real scripts stack a handful; "Zalgo" text stacks thousands.
    public static let maxCombiningMarks = 8

    /// Text whose length in characters lies in `range`, in at most
    /// ``maxBytesPerCharacter`` bytes of UTF-8 per character of that range, without
    /// control characters (a `multiline` text may hold tabs and line breaks), and without
    /// more than ``maxCombiningMarks`` combining marks on one character. NUL in particular
    /// never reaches storage, where it would cut the text short.
    ///
    /// A single-line text also refuses what changes how text around it displays without
    /// showing itself: bidirectional embeddings, overrides and isolates (U+202A–U+202E,
    /// U+2066–U+2069), the zero-width space (U+200B), word joiner (U+2060) and byte order
    /// mark (U+FEFF), and the line and paragraph separators (U+2028, U+2029). The zero-width
    /// joiner and non-joiner (U+200D, U+200C), which emoji sequences and several scripts
    /// need, are accepted between an emoji, a letter of such a script or a virama and
    /// what follows; anywhere else they are refused too.
    ///
    /// The server stores text in Unicode Normalization Form C (see ``normalized(_:)``)
    /// and applies these rules to that form, so what it stores always keeps them.
    public static func text(_ value: String, length range: ClosedRange<Int>, multiline: Bool = false) -> Violation? {
        let maxBytes = range.upperBound * maxBytesPerCharacter
        if value.utf8.count > maxBytes {
            return Violation(.tooLong, "Must be at most \(range.upperBound) characters and \(maxBytes) bytes of UTF-8.")
        }
        if let violation = scalarViolation(value, multiline: multiline) { return violation }
        let count = value.count
        if count < range.lowerBound {
            return range.lowerBound == 1 ? Violation(.tooShort, "Must not be empty.") : Violation(.tooShort, "Must be at least \(range.lowerBound) characters.")
        }
        if count > range.upperBound { return Violation(.tooLong, "Must be at most \(range.upperBound) characters.") }
        return nil
    }

    /// `value` in Unicode Normalization Form C, the form the server stores, so that text
    /// that looks the same compares, sorts and searches the same.
    public static func normalized(_ value: String) -> String {
        // Below U+0300 every character is already in NFC; its UTF-8 lead bytes are < 0xCC.
        if everyByte(of: value, { $0 < 0xCC }) { return value }
        return value.precomposedStringWithCanonicalMapping
    }

    /// Whether every UTF-8 byte of `value` passes `test`: over its contiguous bytes, which
    /// costs a fraction of stepping through its `UTF8View` (a native or small string's are).
    private static func everyByte(of value: String, _ test: (UInt8) -> Bool) -> Bool {
        value.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(test) } ?? value.utf8.allSatisfy(test)
    }

    /// Why the scalars of `value` break the character rules of ``text(_:length:multiline:)``.
    private static func scalarViolation(_ value: String, multiline: Bool) -> Violation? {
        // Printable ASCII breaks none of the rules below: most text is only that.
        if everyByte(of: value, { $0 >= 0x20 && $0 < 0x7F }) { return nil }
        var marks = 0
        var previous: Unicode.Scalar?
        var joinerPending = false
        for scalar in value.unicodeScalars {
            let properties = scalar.properties
            switch properties.generalCategory {
            case .control:
                if !(multiline && (scalar == "\t" || scalar == "\n" || scalar == "\r")) {
                    return Violation(
                        .invalidFormat,
                        multiline
                            ? "Must not contain control characters other than tabs and line breaks."
                            : "Must not contain control characters or line breaks.")
                }
            case .nonspacingMark, .spacingMark, .enclosingMark:
                marks += 1
                if marks > maxCombiningMarks {
                    return Violation(.invalidFormat, "Must not stack more than \(maxCombiningMarks) combining marks on one character.")
                }
                joinerPending = false
                previous = scalar
                continue
            default:
                break
            }
            marks = 0
            if !multiline {
                if invisibleFormatting.contains(scalar.value) { return invisibleFormattingViolation }
                if scalar == "\u{200C}" || scalar == "\u{200D}" {
                    guard let previous, joins(after: previous) else { return invisibleFormattingViolation }
                    joinerPending = true
                } else {
                    joinerPending = false
                }
            }
            previous = scalar
        }
        return joinerPending ? invisibleFormattingViolation : nil
    }

    /// Scalars a single-line text refuses anywhere (see ``text(_:length:multiline:)``).
    private static let invisibleFormatting: Set<UInt32> = [
        0x200B, 0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
        0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF,
    ]

    private static let invisibleFormattingViolation = Violation(
        .invalidFormat,
        "Must not contain bidirectional controls, zero-width spaces or stray joiners, line or paragraph separators, or byte order marks.")

    /// Whether a zero-width joiner or non-joiner may follow `scalar`: an emoji (or its
    /// variation selector), a letter of a script without case (Arabic, Persian, Indic…),
    /// or a virama.
    private static func joins(after scalar: Unicode.Scalar) -> Bool {
        let properties = scalar.properties
        return scalar.value > 0x7F
            && (properties.isEmoji || scalar.value == 0xFE0F || properties.generalCategory == .otherLetter
                || properties.canonicalCombiningClass == .virama)
    }

    /// The longest URL accepted, in Unicode scalars (what JSON Schema's `maxLength` counts).
    public static let maxURLLength = 2048

    /// An absolute `http` or `https` URL with a host, at most ``maxURLLength`` characters.
    public static func webURL(_ value: String) -> Violation? {
        if case let .failure(violation) = parseWebURL(value) { return violation }
        return nil
    }

    /// Parses `value` once, checking it as ``webURL(_:)`` does.
    public static func parseWebURL(_ value: String) -> Result<URL, Violation> {
        // No more bytes than the limit is no more scalars: only a longer one is counted.
        let bytes = value.utf8.count
        if bytes > maxURLLength * maxBytesPerCharacter || (bytes > maxURLLength && value.unicodeScalars.count > maxURLLength) {
            return .failure(Violation(.tooLong, "Must be at most \(maxURLLength) characters."))
        }
        guard let url = URL(string: value), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { return .failure(Violation(.invalidURL, "Must be an absolute http or https URL.")) }
        return .success(url)
    }

    /// A finite number in `range`.
    public static func number(_ value: Double, in range: ClosedRange<Double>) -> Violation? {
        guard value.isFinite, range.contains(value) else {
            return Violation(.outOfRange, "Must be between \(format(range.lowerBound)) and \(format(range.upperBound)).")
        }
        return nil
    }

    /// An ISO 3166-1 alpha-2 code: two upper-case ASCII letters.
    public static func countryCode(_ value: String) -> Violation? {
        let bytes = Array(value.utf8)
        guard bytes.count == 2, bytes.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
            return Violation(.invalidFormat, "Must be an ISO 3166-1 alpha-2 code: two upper-case letters, such as FR.")
        }
        return nil
    }

    /// An asset name: 1…200 letters, digits, `-`, `_` or `.`, not starting with `.`.
    public static func assetName(_ value: String) -> Violation? {
        if let violation = text(value, length: 1...200) { return violation }
        let allowed = everyByte(of: value) { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
        }
        guard allowed, value.first != "." else {
            return Violation(.invalidFormat, "Must contain only letters, digits, '-', '_' and '.', and not start with '.'.")
        }
        return nil
    }

    /// An absolute `https` URL with a host, at most ``maxURLLength`` characters.
    public static func httpsURL(_ value: String) -> Violation? {
        switch parseWebURL(value) {
        case let .failure(violation): violation
        case let .success(url): url.scheme?.lowercased() == "https" ? nil : Violation(.invalidURL, "Must be an absolute https URL.")
        }
    }

    /// The longest email address accepted, in Unicode scalars (RFC 5321's path limit less
    /// its brackets; at most 1,016 bytes).
    public static let maxEmailLength = 254

    /// The Unicode scalars an email address may not hold, as closed ranges: `@` itself
    /// (outside the one separator), C0 and C1 controls, every `White_Space` scalar, the
    /// zero-width space, joiners, word joiner and byte order mark, bidirectional controls,
    /// and line and paragraph separators. `openapi.yaml`'s email pattern is written from
    /// this list (a test compares them), so the contract and the server accept exactly the
    /// same strings.
    public static let emailRefusedScalars: [ClosedRange<UInt32>] = [
        0x00...0x20, 0x40...0x40, 0x7F...0xA0, 0x1680...0x1680, 0x2000...0x200D, 0x2028...0x202F,
        0x205F...0x2060, 0x2066...0x2069, 0x3000...0x3000, 0xFEFF...0xFEFF,
    ]

    /// An email address: one `@` between a non-empty local part and a non-empty domain,
    /// neither holding a scalar of ``emailRefusedScalars``, at most ``maxEmailLength``
    /// Unicode scalars (what JSON Schema's `maxLength` counts). Scalars, not characters,
    /// are read: a domain may begin with a combining mark (a Bengali vowel sign), which
    /// would join the `@` in one character.
    public static func email(_ value: String) -> Violation? {
        let scalars = value.unicodeScalars
        let bytes = value.utf8.count
        if bytes > maxEmailLength * maxBytesPerCharacter || (bytes > maxEmailLength && scalars.count > maxEmailLength) {
            return Violation(.tooLong, "Must be at most \(maxEmailLength) characters.")
        }
        var at: String.UnicodeScalarView.Index?
        var valid = true
        for index in scalars.indices {
            let scalar = scalars[index]
            if scalar == "@", at == nil {
                at = index
            } else if emailRefusedScalars.contains(where: { $0.contains(scalar.value) }) {
                valid = false
                break
            }
        }
        guard valid, let at, at != scalars.startIndex, scalars.index(after: at) != scalars.endIndex else {
            return Violation(.invalidFormat, "Must be an email address, such as ana@example.com.")
        }
        return nil
    }

    /// One of `allowed`.
    public static func oneOf(_ value: String, _ allowed: [String]) -> Violation? {
        allowed.contains(value) ? nil : Violation(.invalidFormat, "Must be one of: \(allowed.joined(separator: ", ")).")
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

/// The rule one field's value must keep, defined once here: the server applies it to
/// request bodies and import records (through each resource's declaration), and client
/// apps through `validationErrors()`, so the two can never disagree.
public struct FieldRule<Value>: Sendable {
    private let check: @Sendable (Value) -> Violation?

    /// A rule that `check` decides; it returns `nil` when the value is acceptable.
    public init(_ check: @escaping @Sendable (Value) -> Violation?) {
        self.check = check
    }

    /// Why `value` breaks the rule, or `nil` when it keeps it.
    public func violation(_ value: Value) -> Violation? {
        check(value)
    }
}

extension FieldRule where Value == String {
    /// ``Rules/text(_:length:multiline:)``.
    public static func text(length: ClosedRange<Int>, multiline: Bool = false) -> FieldRule {
        FieldRule { Rules.text($0, length: length, multiline: multiline) }
    }

    /// ``Rules/webURL(_:)``.
    public static var webURL: FieldRule { FieldRule(Rules.webURL) }

    /// ``Rules/countryCode(_:)``.
    public static var countryCode: FieldRule { FieldRule(Rules.countryCode) }

    /// ``Rules/assetName(_:)``.
    public static var assetName: FieldRule { FieldRule(Rules.assetName) }

    /// ``Rules/httpsURL(_:)``.
    public static var httpsURL: FieldRule { FieldRule(Rules.httpsURL) }

    /// ``Rules/email(_:)``.
    public static var email: FieldRule { FieldRule(Rules.email) }

    /// ``Rules/oneOf(_:_:)``.
    public static func oneOf(_ allowed: [String]) -> FieldRule { FieldRule { Rules.oneOf($0, allowed) } }
}

extension FieldRule where Value == Double {
    /// ``Rules/number(_:in:)``.
    public static func number(in range: ClosedRange<Double>) -> FieldRule {
        FieldRule { Rules.number($0, in: range) }
    }
}

extension FieldRule where Value == Int {
    /// An integer in `range`.
    public static func integer(in range: ClosedRange<Int>) -> FieldRule {
        FieldRule { range.contains($0) ? nil : Violation(.outOfRange, "Must be from \(range.lowerBound) to \(range.upperBound).") }
    }
}

extension Array where Element == FieldError {
    /// Appends the violation of `rule` by `value`, if any, at `pointer`.
    mutating func check<Value>(_ value: Value, _ rule: FieldRule<Value>, at pointer: String) {
        if let violation = rule.violation(value) { append(violation.at(pointer)) }
    }
}

/// A request body that can check itself against the shared rules.
public protocol Validatable {
    /// Every rule the value breaks, one entry per failing field; empty when valid.
    func validationErrors() -> [FieldError]
}
