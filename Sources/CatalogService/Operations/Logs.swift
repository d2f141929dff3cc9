import CatalogModels
import Foundation
import HTTPServer
import Logging

/// How log lines look.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `2026-11-22T01:33:13.123Z info request method=GET path=/v1/games status=200 …`
    case text
    /// One JSON object per line: `{"time":…,"level":"info","message":"request","method":"GET",…}`
    case json
}

/// A swift-log handler writing one line per entry to standard output through
/// ``LogWriter``, so the threads that log never wait for the terminal or a pipe.
public struct CatalogLogHandler: LogHandler {
    /// The entries at this level and above are written.
    public var logLevel: Logger.Level
    /// Metadata added to every entry.
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let format: LogFormat

    /// Installs the handler for every logger of the process (once, at startup).
    public static func bootstrap(format: LogFormat, level: Logger.Level) {
        LogWriter.shared.format = format
        LoggingSystem.bootstrap { label in CatalogLogHandler(label: label, format: format, level: level) }
    }

    init(label: String, format: LogFormat, level: Logger.Level) {
        self.label = label
        self.format = format
        logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        LogWriter.shared.write(Self.line(format: format, level: event.level, message: "\(event.message)", fields: fields))
    }

    static func line(format: LogFormat, level: Logger.Level, message: String, fields: Logger.Metadata) -> String {
        let time = Timestamp.string(from: Date())
        let keys = fields.keys.sorted()
        switch format {
        case .text:
            var line = "\(time) \(level) \(message)"
            for key in keys { line += " \(key)=\(fields[key].map { "\($0)" } ?? "")" }
            return line + "\n"
        case .json:
            var line = "{\"time\":\"\(time)\",\"level\":\"\(level)\",\"message\":"
            ProblemDocument.appendQuoted(message, to: &line)
            for key in keys {
                line += ","
                ProblemDocument.appendQuoted(key, to: &line)
                line += ":"
                ProblemDocument.appendQuoted(fields[key].map { "\($0)" } ?? "", to: &line)
            }
            return line + "}\n"
        }
    }
}

/// Writes log lines to standard output from a thread of its own, in batches: at least
/// every 20 ms, or as soon as 64 KiB are waiting. Loggers never wake the writer for a
/// single line, which would cost a context switch per request. Bounded: when output
/// cannot keep up (a stalled pipe) and 8 MiB wait, further lines are dropped and counted,
/// and one line says how many once output moves again.
public final class LogWriter: @unchecked Sendable {
    /// The process's writer.
    public static let shared = LogWriter()

    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var writing = false
    /// Lines dropped since the last batch, because too much was waiting.
    private var dropped = 0
    private var lineFormat = LogFormat.text

    /// The format of the line that reports dropped lines.
    var format: LogFormat {
        get { condition.withLock { lineFormat } }
        set { condition.withLock { lineFormat = newValue } }
    }

    private init() {
        let thread = Thread { [self] in run() }
        thread.name = "catalog-log"
        thread.start()
    }

    private static let batchBytes = 64 * 1024
    private static let maxPendingBytes = 8 << 20
    private static let interval: TimeInterval = 0.02

    func write(_ line: String) {
        condition.lock()
        guard pending.count < Self.maxPendingBytes else {
            dropped += 1
            condition.unlock()
            return
        }
        let first = pending.isEmpty
        pending.append(contentsOf: line.utf8)
        // The first line wakes the writer, which has slept since its last batch; it then
        // gathers lines for ``interval``, unless a full batch wakes it before. (A broadcast:
        // a `flush` may wait on the same condition, and the writer's wait has no timeout.)
        if first || pending.count >= Self.batchBytes { condition.broadcast() }
        condition.unlock()
    }

    /// Returns once every line written so far is out.
    public func flush() {
        condition.lock()
        condition.broadcast()
        while !pending.isEmpty || writing { _ = condition.wait(until: Date(timeIntervalSinceNow: 0.01)) }
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            // With nothing to write, the writer sleeps until the first line: an idle server's
            // log wakes no one.
            while pending.isEmpty { condition.wait() }
            let deadline = Date(timeIntervalSinceNow: Self.interval)
            while pending.count < Self.batchBytes, condition.wait(until: deadline) {}
            var batch = pending
            pending.removeAll(keepingCapacity: true)
            if dropped > 0 {
                batch += Array(
                    CatalogLogHandler.line(
                        format: lineFormat, level: .warning, message: "log lines dropped",
                        fields: ["count": "\(dropped)"]
                    ).utf8)
                dropped = 0
            }
            writing = true
            condition.unlock()
            batch.withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                var offset = 0
                while offset < bytes.count {
                    let count = Foundation.write(1, base + offset, bytes.count - offset)
                    if count <= 0 { break }
                    offset += count
                }
            }
            condition.lock()
            writing = false
            condition.broadcast()
            condition.unlock()
        }
    }
}

/// The access log: one `request` line per answered request.
enum AccessLog {
    static func observer(_ logger: Logger) -> @Sendable (CompletedRequest) -> Void {
        { request in
            logger.info(
                "request",
                metadata: [
                    "method": "\(request.method)", "path": "\(request.path)", "status": "\(request.status)", "bytes": "\(request.bytes)",
                    "durationMicroseconds": "\(request.durationMicroseconds)", "requestId": "\(request.requestID)", "peer": "\(request.remoteAddress)",
                ])
        }
    }
}
