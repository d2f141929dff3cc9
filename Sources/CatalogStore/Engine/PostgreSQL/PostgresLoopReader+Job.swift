extension PostgresLoopReader {
    /// A read: its statement, and what receives its rows (`nil`: run it elsewhere). A class:
    /// a read moves through the line, its batch and its statement, and a struct of its five
    /// references was retained and released five times at each move.
    final class Job {
        let sql: String
        let arguments: SQLArguments
        /// How it may share a statement with the batch's other reads.
        let sharing: LoopReadSharing?
        /// Who asks, for a heavy read (``PostgresLoopReader/heavyPerCaller``).
        let caller: String?
        /// Whether it holds one of its caller's places (``PostgresLoopReader/release(_:)``).
        var holdsPlace = false
        /// Whether nobody waits for the answer any more (a waiting read is then dropped).
        let isAbandoned: () -> Bool
        let completion: (Result<PostgresRows, any Error>?) -> Void
        /// Whether it was put back in the line once already (``batchEnded(_:skipped:)``).
        var resent = false

        init(
            sql: String, arguments: SQLArguments, sharing: LoopReadSharing?, caller: String? = nil, isAbandoned: @escaping () -> Bool,
            completion: @escaping (Result<PostgresRows, any Error>?) -> Void
        ) {
            self.sql = sql
            self.arguments = arguments
            self.sharing = sharing
            self.caller = caller
            self.isAbandoned = isAbandoned
            self.completion = completion
        }
    }
}
