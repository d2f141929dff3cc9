-- The first answer to each POST sent with an Idempotency-Key, so that a retry with the
-- same key, caller and request replays it instead of writing again (for 24 hours).
-- `caller` is the API key or user that sent it; `fingerprint` is the SHA-256 of the
-- method, target and body; `headers` holds the replayed header lines (Location, ETag…).
CREATE TABLE idempotency_keys (
    caller TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    status INTEGER NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (caller, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
