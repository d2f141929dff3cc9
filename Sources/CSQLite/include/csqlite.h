// C helpers for the system SQLite: the process's SQLite settings, a VFS that writes each
// commit's WAL frames with one call, and search functions on FTS5's own tokenizer.
#ifndef CSQLITE_H
#define CSQLITE_H

/// Sets this process's SQLite-wide options; call before SQLite is first used (any
/// connection opened). Returns an SQLite result code (0 is SQLITE_OK).
///
/// - It turns memory statistics off (`SQLITE_CONFIG_MEMSTATUS`): with them on, every
///   allocation SQLite makes takes one global mutex, shared by all connections and
///   threads, and the system library allocates through it often (it is built without
///   lookaside). Nothing here reads those statistics or sets a heap limit. Once SQLite
///   is in use this changes nothing, and the result is SQLITE_MISUSE (21).
/// - SQLite allocates through the system's malloc as before, except that each thread
///   keeps up to 32 freed 1 KiB blocks for reuse (given back when it exits): the chunks
///   of in-memory statement journals, about ten per created item, which overflowed
///   glibc's own per-thread cache of seven. Also only before SQLite is in use.
/// - It makes `catalog-wal` the default VFS (``csqlite_register_wal_vfs``), for the
///   connections opened after it.
int csqlite_configure(void);

/// Registers `catalog-wal` as the default VFS: the system's default VFS, except that each
/// WAL file gathers the frames a transaction appends (two writes per frame: header and
/// page) and writes them with one call when the commit is complete, or sooner when
/// anything looks at the file, a write goes over what it wrote, or the 124 KiB buffer
/// fills; frames of a transaction that rolled back are dropped when the connection gives
/// up the WAL's write lock. A commit is in the file, or has failed with its error, before
/// SQLite publishes it, as before. Idempotent and thread-safe. Returns an SQLite result code.
int csqlite_register_wal_vfs(void);

/// Registers `catalog_match` and `catalog_rank` on the SQLite connection `db` (a
/// `sqlite3 *`). Returns an SQLite result code (0 is SQLITE_OK).
///
/// Both read a query of words separated by spaces, each ending in `*` when it matches as
/// a prefix (as ``SearchQuery`` writes it), and fold text with FTS5's `unicode61`
/// tokenizer (`remove_diacritics 2`), the full-text tables' own, so they match exactly
/// the rows `MATCH` would:
///
/// - `catalog_match(query, column…)` is 1 when every word of the query is a token of
///   one of the columns (or, for a prefix, begins one), else 0.
/// - `catalog_rank(query, weight, column, weight, column…)` is a relevance, lower is
///   better: minus BM25 (k1 = 1.2, b = 0.75) summed over the words and the weighted
///   columns, without its inverse document frequency and with a fixed nominal column
///   length, so that a row's rank depends on the row and the query alone; NULL for a row
///   `catalog_match` would not match.
int csqlite_register_search(void *db);

#endif
