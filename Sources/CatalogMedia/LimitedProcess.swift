import CLinux
import Foundation

/// What a child process may use (``LimitedProcess``).
package struct ProcessLimits: Sendable {
    /// Wall-clock time; past it the process group is killed.
    package var wallClock: Duration
    /// CPU seconds (`RLIMIT_CPU`).
    package var cpuSeconds: Int
    /// Address space in bytes (`RLIMIT_AS`).
    package var memoryBytes: Int
    /// The largest file it may write (`RLIMIT_FSIZE`).
    package var fileBytes: Int
    /// Its scheduling priority (19: only what the server leaves idle).
    package var niceness: Int32 = 19

    package init(wallClock: Duration, cpuSeconds: Int, memoryBytes: Int, fileBytes: Int, niceness: Int32 = 19) {
        self.wallClock = wallClock
        self.cpuSeconds = cpuSeconds
        self.memoryBytes = memoryBytes
        self.fileBytes = fileBytes
        self.niceness = niceness
    }
}

/// One run of a program (ffprobe, ffmpeg) as a child process with limits: its own process
/// group (killed whole past the wall clock, or when the caller gives up), CPU, memory and
/// file-size limits, a low priority, no descriptor of the server, and its output and
/// errors to files (the output read back bounded, the errors' last lines kept).
package enum LimitedProcess {
    /// How a run ended.
    package enum Outcome: Sendable, Equatable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it (a limit: SIGXCPU, SIGKILL for memory it could not get, SIGXFSZ).
        case signaled(Int32)
        /// It ran past its wall clock and was killed.
        case timedOut
        /// The caller gave up on it (a shutdown) and it was killed.
        case cancelled
    }

    /// What a run left.
    package struct Result: Sendable {
        package var outcome: Outcome
        /// Its standard output, at most the limit asked for.
        package var output: [UInt8]
        /// The end of its standard error (at most 4 KiB), for logs and reasons.
        package var errors: String
    }

    /// The absolute path of `program` on `PATH`, if it is there.
    package static func find(_ program: String, path: String = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") -> String? {
        for directory in path.split(separator: ":") {
            let candidate = directory + "/" + program
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Runs `executable` with `arguments` under `limits`, in `scratch` (a directory for its
    /// output files), reading back at most `outputLimit` bytes of its output.
    /// `isCancelled` is asked every tenth of a second.
    package static func run(
        _ executable: String, _ arguments: [String], limits: ProcessLimits, scratch: String, outputLimit: Int = 1 << 20,
        isCancelled: @Sendable () -> Bool = { false }
    ) throws(MediaStoreError) -> Result {
        let name = UUID().uuidString
        let outputPath = scratch + "/.out-" + name, errorPath = scratch + "/.err-" + name
        let output = open(outputPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let error = open(errorPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer {
            if output >= 0 { close(output) }
            if error >= 0 { close(error) }
            unlink(outputPath)
            unlink(errorPath)
        }
        guard output >= 0, error >= 0 else { throw MediaStoreError("Cannot create output files in \(scratch): \(String(cString: strerror(errno)))") }
        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { $0.withCString { strdup($0) } }
        argv.append(nil)
        var environment: [UnsafeMutablePointer<CChar>?] = ["PATH=/usr/bin:/bin", "LC_ALL=C"].map { $0.withCString { strdup($0) } }
        environment.append(nil)
        defer {
            for pointer in argv + environment { free(pointer) }
        }
        var pid: pid_t = 0
        let status = clinux_spawn_limited(
            &pid, executable, argv, environment, output, error, limits.cpuSeconds, limits.memoryBytes, limits.fileBytes, limits.niceness)
        guard status == 0 else { throw MediaStoreError("Cannot start \(executable): \(String(cString: strerror(status)))") }
        let outcome = wait(pid, deadline: ContinuousClock.now + limits.wallClock, isCancelled: isCancelled)
        return Result(outcome: outcome, output: read(output, limit: outputLimit, fromEnd: false), errors: String(decoding: read(error, limit: 4096, fromEnd: true), as: UTF8.self))
    }

    /// Waits for `pid` until `deadline`, killing its group past it or once `isCancelled`.
    private static func wait(_ pid: pid_t, deadline: ContinuousClock.Instant, isCancelled: () -> Bool) -> Outcome {
        var killedFor: Outcome?
        while true {
            var status: Int32 = 0
            let waited = waitpid(pid, &status, killedFor == nil ? WNOHANG : 0)
            if waited == pid {
                if let killedFor { return killedFor }
                // WIFEXITED / WTERMSIG, which Swift does not import as macros.
                return status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signaled(status & 0x7F)
            }
            if waited < 0, errno != EINTR { return killedFor ?? .signaled(SIGKILL) }
            if killedFor == nil {
                if ContinuousClock.now >= deadline {
                    killedFor = .timedOut
                } else if isCancelled() {
                    killedFor = .cancelled
                }
                if killedFor != nil {
                    if kill(-pid, SIGKILL) != 0 { kill(pid, SIGKILL) }
                    continue
                }
                usleep(100_000)
            }
        }
    }

    /// At most `limit` bytes of the file `descriptor` (its last ones when `fromEnd`).
    private static func read(_ descriptor: Int32, limit: Int, fromEnd: Bool) -> [UInt8] {
        let size = Int(lseek(descriptor, 0, SEEK_END))
        guard size > 0 else { return [] }
        let count = min(size, limit)
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(fromEnd ? size - count : 0)) }
        return Array(bytes.prefix(max(0, got)))
    }
}
