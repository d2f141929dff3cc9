-- The full-text indexes keep their pending lists to 64 kB, PostgreSQL's least, rather than
-- the default 4 MB (gin_pending_list_limit). A GIN index with fastupdate adds the entries
-- of new rows to an unsorted pending list, which every search reads whole until a vacuum,
-- or an insert that finds it past the limit, merges it into the index. After 10,000 rows
-- were copied in, before any vacuum, a search for one word planned a sequential scan
-- (5.4 ms); with 64 kB it used the index (0.14 ms). Durable creates did not slow:
-- 10,918 and 10,973 a second against 10,125 and 10,359 (Benchmarks/README, fourteenth part).

-- The log's lock first, as every writer takes it before any table lock (0013).
SELECT pg_advisory_xact_lock(7031950146);

ALTER INDEX playable_items_search SET (gin_pending_list_limit = 64);
ALTER INDEX games_search SET (gin_pending_list_limit = 64);
ALTER INDEX playlists_search SET (gin_pending_list_limit = 64);
