extension PostgresLoopReader {
    /// Which reads a reader takes, and how they wait.
    enum Lane: Sendable {
        /// Reads by key and plain list pages: tens of microseconds each in PostgreSQL,
        /// batched up to ``PostgresLoopReader/maxBatch`` a connection, waiting in the line
        /// for a connection to be free.
        case quick
        /// Searches and geographic lists, which may take milliseconds: at most
        /// ``PostgresLoopReader/heavyBatch`` a batch, each statement followed by a `Sync`
        /// of its own (answered as soon as it has run, and failing alone), and a caller
        /// holds at most ``PostgresLoopReader/heavyPerCaller`` of a loop's. While every
        /// connection of the lane holds a batch PostgreSQL has been silent on for longer than
        /// ``PostgresLoopReader/slowBatch``, reads go elsewhere (the expensive reads' pool,
        /// where callers take turns) rather than wait behind a slow search.
        case heavy

        /// Reads one batch takes at most.
        var maxBatch: Int { self == .quick ? PostgresLoopReader.maxBatch : PostgresLoopReader.heavyBatch }
        /// Batches a loop keeps in flight at most while PostgreSQL answers them within
        /// ``PostgresLoopReader/slowBatch`` and the line holds less than a batch
        /// (``PostgresLoopReader/mayStartBatch(_:)``): one of quick reads, whose batch is
        /// mostly one statement (`GET`s by id share one, and so do reads of one page); two
        /// of searches, which PostgreSQL then runs side by side.
        var promptBatches: Int { self == .quick ? 1 : 2 }
        /// What its connections call themselves in `pg_stat_activity`.
        var applicationName: String { self == .quick ? "catalog-loop-reads" : "catalog-loop-searches" }
    }

    /// Heavy reads (``Lane/heavy``) a connection sends in one batch at most: a search waits
    /// for at most the three before it (each within the statement timeout).
    static let heavyBatch = 4
    /// Connections of the heavy lane a loop opens at most, whatever the loops.
    static let heavyConnectionsPerLoop = 2
    /// Connections of the heavy lane all the loops of a server open at most, but for 1
    /// per loop beyond four loops (``connections(loops:lane:)``).
    static let heavyConnectionsPerServer = 4

    /// The connections of `lane` each of `loops` loops opens at most: for quick reads 8,
    /// fewer with more than two loops (16 for all of them), and never fewer than 2; for
    /// heavy ones 2, fewer with more than two loops (4 for all of them), and never fewer than 1.
    static func connections(loops: Int, lane: Lane = .quick) -> Int {
        switch lane {
        case .quick: max(2, min(connectionsPerLoop, connectionsPerServer / max(1, loops)))
        case .heavy: max(1, min(heavyConnectionsPerLoop, heavyConnectionsPerServer / max(1, loops)))
        }
    }
}
