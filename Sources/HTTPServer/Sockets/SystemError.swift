#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed system call, with the `errno` it left behind.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    /// The name of the call that failed, such as `bind`.
    public let call: String
    /// The value of `errno` right after the call.
    public let errno: Int32

    init(_ call: String, errno: Int32 = Glibc.errno) {
        self.call = call
        self.errno = errno
    }

    /// A human-readable description, such as `bind: Address already in use`.
    public var description: String {
        "\(call): \(String(cString: strerror(errno)))"
    }
}
