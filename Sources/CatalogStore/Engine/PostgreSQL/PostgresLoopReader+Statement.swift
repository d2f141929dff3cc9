import CPostgres
import CatalogModels

extension PostgresLoopReader {
    /// A statement of a batch and the reads it answers: one read's own, or one that several
    /// reads of the batch share (``LoopReadSharing``, as the first read's says: by key, the
    /// kind's statement for all their keys; identical, the first read's statement, run once).
    enum Statement {
        case one(Job)
        case shared(Job, [Job])

        /// The statements of `batch`, in the order of their first reads: each read's own, but
        /// one for all the reads by key of one kind, and one for identical reads, when there
        /// are several. A read sent again runs alone: its shared statement failed, say, and
        /// alone it meets its own outcome (and no read new to the batch shares a failure again).
        static func grouping(_ batch: [Job]) -> [Statement] {
            // Each statement's reads, in the order of its first.
            var groups: [(first: Job, others: [Job])] = []
            for job in batch {
                if let index = groups.firstIndex(where: { sharable($0.first, job) }) {
                    groups[index].others.append(job)
                } else {
                    groups.append((job, []))
                }
            }
            return groups.map { first, others in others.isEmpty ? .one(first) : .shared(first, others) }
        }

        /// Whether `job` may share `first`'s statement: both by key of one kind, or both
        /// identical with the same statement and arguments, byte for byte; neither sent again.
        private static func sharable(_ first: Job, _ job: Job) -> Bool {
            guard !first.resent, !job.resent, let sharing = first.sharing, let other = job.sharing else { return false }
            return switch (sharing, other) {
            case let (.byKey(sql, _, _), .byKey(otherSQL, _, _)): sql == otherSQL
            case (.identical, .identical):
                first.sql == job.sql && first.arguments.count == job.arguments.count
                    && zip(first.arguments, job.arguments).allSatisfy { $0.sqlValue.isIdentical(to: $1.sqlValue) }
            default: false
            }
        }

        /// The reads it answers.
        var jobs: [Job] {
            switch self {
            case let .one(job): [job]
            case let .shared(first, others): [first] + others
            }
        }

        /// What it runs.
        var sql: String {
            switch self {
            case let .shared(first, _): if case let .byKey(sql, _, _) = first.sharing { sql } else { first.sql }
            case let .one(job): job.sql
            }
        }

        /// What it binds: reads by key, their keys as one JSON array.
        var arguments: SQLArguments {
            switch self {
            case let .shared(first, _):
                if case .byKey = first.sharing { [JSONArrayParameter.text(jobs.lazy.map { Self.key(of: $0)?.rawValue ?? "" }, quoted: true)] } else { first.arguments }
            case let .one(job): job.arguments
            }
        }

        /// Whether its failure is none of its reads' own (a statement reads by key share,
        /// cancelled, say): they are sent again, once, each alone, and then run elsewhere.
        /// Identical reads share their statement's failure: it is each one's own.
        var failureIsShared: Bool {
            if case let .shared(first, _) = self, case .byKey = first.sharing { true } else { false }
        }

        /// The rows of `shared`, this shared statement's result, that answer `job`: the row
        /// of its key, or, for identical reads, all of them.
        static func rows(of job: Job, in shared: SharedResult) -> Range<Int32> {
            guard case let .byKey(_, key, column) = job.sharing else { return 0..<PQntuples(shared.result) }
            return shared.row(key.rawValue, column: column).map { $0..<($0 + 1) } ?? 0..<0
        }

        private static func key(of job: Job) -> CatalogID? {
            if case let .byKey(_, key, _) = job.sharing { key } else { nil }
        }
    }
}
