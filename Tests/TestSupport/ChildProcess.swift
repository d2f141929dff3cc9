import CLinux
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, with the part of Foundation's `Process`
/// the tests use. Foundation's `Process.run()` on Linux (Swift 6.3) reads past a buffer
/// while it lists `/proc/self/fd` (swift-corelibs-foundation#5472) and crashed the test
/// runner now and then; this spawns with the C library's own calls, and the child keeps
/// no descriptor but its standard three.
public final class ChildProcess: @unchecked Sendable {
    /// The program.
    public var executableURL: URL?
    /// Its arguments, after its path.
    public var arguments: [String] = []
    /// Its whole environment; `nil` passes this process's.
    public var environment: [String: String]?
    /// A `Pipe` (the child reads its reading end) or a `FileHandle`; `nil` shares ours.
    public var standardInput: Any?
    /// A `Pipe` (the child writes its writing end) or a `FileHandle`; `nil` shares ours.
    public var standardOutput: Any?
    /// As ``standardOutput``.
    public var standardError: Any?
    /// The child's process id, once it runs.
    public private(set) var processIdentifier: Int32 = 0

    private let lock = NSLock()
    /// The status `waitpid` reported once the child ended.
    private var status: Int32?

    public init() {}

    /// Starts the child.
    public func run() throws {
        guard let path = executableURL?.path else { throw POSIXError(.ENOENT) }
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }
        func descriptor(_ stream: Any?, reading: Bool) throws -> Int32 {
            switch stream {
            case let pipe as Pipe: return (reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting).fileDescriptor
            case let handle as FileHandle where handle === FileHandle.nullDevice:
                let fd = open("/dev/null", reading ? O_RDONLY : O_WRONLY)
                guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                opened.append(fd)
                return fd
            case let handle as FileHandle: return handle.fileDescriptor
            default: return -1
            }
        }
        let input = try descriptor(standardInput, reading: true)
        let output = try descriptor(standardOutput, reading: false)
        let error = try descriptor(standardError, reading: false)
        let environment = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = clinux_spawn(&pid, path, argv, envp, input, output, error)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        processIdentifier = pid
        // As Foundation does: the child's ends of pipes are the child's alone now, so a
        // reader of its output sees the end of it when the child exits.
        if let pipe = standardInput as? Pipe { try? pipe.fileHandleForReading.close() }
        var closed: Set<ObjectIdentifier> = []
        for case let pipe as Pipe in [standardOutput, standardError] where closed.insert(ObjectIdentifier(pipe)).inserted {
            try? pipe.fileHandleForWriting.close()
        }
    }

    /// Whether the child has started and not yet ended.
    public var isRunning: Bool {
        processIdentifier != 0 && reap(blocking: false) == nil
    }

    /// Waits until the child has ended.
    public func waitUntilExit() {
        _ = reap(blocking: true)
    }

    /// Its exit code, or the signal that ended it.
    public var terminationStatus: Int32 {
        guard let status = reap(blocking: true) else { return 0 }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    /// Whether it exited or a signal ended it.
    public var terminationReason: Process.TerminationReason {
        guard let status = reap(blocking: true) else { return .exit }
        return status & 0x7f == 0 ? .exit : .uncaughtSignal
    }

    /// Sends SIGTERM, unless the child has ended.
    public func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    /// The child's wait status once it has ended (waiting for that when `blocking`). The
    /// lock guards only the recorded status: a thread waiting for the child never keeps
    /// another from asking or from terminating it.
    private func reap(blocking: Bool) -> Int32? {
        if let status = lock.withLock({ status }) { return status }
        guard processIdentifier != 0 else { return nil }
        var raw: Int32 = 0
        while true {
            let result = waitpid(processIdentifier, &raw, blocking ? 0 : WNOHANG)
            if result == processIdentifier {
                lock.withLock { status = raw }
                return raw
            }
            if result == -1, errno == EINTR { continue }
            if result == -1, errno == ECHILD {
                // Another thread reaped it and is about to record its status.
                while blocking, lock.withLock({ status }) == nil { usleep(1_000) }
                return lock.withLock { status }
            }
            return nil
        }
    }
}
