import CatalogModels

/// The errors found in a document: the first ``Problem/maxListedErrors`` listed, the rest
/// only counted, so that reading a hostile body (a document of 80,000 unknown members)
/// costs little and its 422 stays small.
package struct FieldErrors: Sendable, Equatable {
    /// The errors listed, in the order they were found.
    package private(set) var listed: [FieldError] = []
    /// How many more were found and not listed.
    package private(set) var unlisted = 0

    /// No errors.
    package init() {}

    /// `errors`, listed up to the limit.
    package init(_ errors: [FieldError]) {
        for error in errors { append(error) }
    }

    /// Whether nothing failed.
    package var isEmpty: Bool { listed.isEmpty && unlisted == 0 }

    /// Whether the list is full: further errors are only counted.
    package var isFull: Bool { listed.count >= Problem.maxListedErrors }

    /// Adds an error; it is made only while the list has room.
    package mutating func append(_ error: @autoclosure () -> FieldError) {
        if isFull { unlisted += 1 } else { listed.append(error()) }
    }

    /// Adds `other`'s errors, their pointers prefixed with `prefix`.
    package mutating func append(contentsOf other: FieldErrors, prefixing prefix: String = "") {
        for error in other.listed { append(prefix.isEmpty ? error : error.prefixed(prefix)) }
        unlisted += other.unlisted
    }

    /// Adds `errors`.
    package mutating func append(contentsOf errors: [FieldError]) {
        for error in errors { append(error) }
    }

    /// Counts `count` more errors without listing them.
    package mutating func count(_ count: Int) {
        unlisted += count
    }
}
