#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A statement's SQL as a dictionary key, hashed by its length and four of its bytes'
/// 8-byte words rather than every byte: the store's statements are few and long (hashing
/// each whole on every read cost more than the rest of the lookup). Keys are equal when
/// their bytes are, as the engine reads them; texts that hash alike only share a bucket.
struct StatementKey: Hashable {
    let sql: String

    init(_ sql: String) {
        self.sql = sql
    }

    static func == (lhs: StatementKey, rhs: StatementKey) -> Bool {
        lhs.withBytes { left in
            rhs.withBytes { right in
                guard left.count == right.count else { return false }
                guard let a = left.baseAddress, let b = right.baseAddress else { return true }
                return memcmp(a, b, left.count) == 0
            }
        }
    }

    func hash(into hasher: inout Hasher) {
        withBytes { bytes in
            hasher.combine(bytes.count)
            guard bytes.count >= 8, let base = UnsafeRawPointer(bytes.baseAddress) else {
                return hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            }
            let last = bytes.count - 8
            hasher.combine(base.loadUnaligned(fromByteOffset: last / 4, as: UInt64.self))
            hasher.combine(base.loadUnaligned(fromByteOffset: last / 2, as: UInt64.self))
            hasher.combine(base.loadUnaligned(fromByteOffset: last * 3 / 4, as: UInt64.self))
            hasher.combine(base.loadUnaligned(fromByteOffset: last, as: UInt64.self))
        }
    }

    /// The SQL's UTF-8 bytes: in place for a native string, copied otherwise.
    private func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = sql.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(sql.utf8).withUnsafeBufferPointer(body)
    }
}
