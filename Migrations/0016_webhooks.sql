-- Webhooks (issue 37). An endpoint (`webhooks`) receives signed messages for the event
-- types it names. Its signing secret is sealed (AES-256-GCM, with the server's webhook
-- key) and never stored in plain text; after a rotation the previous one signs too until
-- previous_secret_expires_at.
--
-- How a change becomes deliveries:
--   1. A trigger on the change log writes a row of `webhook_events` in the transaction of
--      the change itself (only while some endpoint is enabled): every committed change is
--      there once, none that was rolled back ever is. Changes that leave a resource's
--      version as it was (likes and views added up) make none.
--   2. The dispatcher turns events into `webhook_messages` (the body, rendered once and
--      sent unchanged on every attempt, with its stable `webhook-id`) and one
--      `webhook_deliveries` row per matching endpoint, deleting the events in the same
--      transaction.
--   3. Senders claim due deliveries (locked_by/locked_until, a lease renewed while held),
--      send them, and record each outcome: `delivered`, or the next attempt, or `failed`
--      three days after the first; `dropped` when too many waited for the endpoint.
-- A delivery's latest attempt is kept on its row; earlier ones move to `webhook_attempts`.

CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    event_types TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    secret BLOB NOT NULL,
    previous_secret BLOB,
    previous_secret_expires_at INTEGER,
    failing_since INTEGER,
    disabled_at INTEGER,
    disabled_reason TEXT,
    dropped INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE webhook_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_type TEXT NOT NULL,
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    version INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    changed_at INTEGER NOT NULL
);

CREATE TABLE webhook_messages (
    id TEXT PRIMARY KEY,
    event_type TEXT NOT NULL,
    body BLOB NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE webhook_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    message_id TEXT NOT NULL REFERENCES webhook_messages (id),
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'dropped')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    first_attempt_at INTEGER,
    locked_by TEXT,
    locked_until INTEGER,
    last_attempt_at INTEGER,
    last_status INTEGER,
    last_duration_ms INTEGER,
    last_error TEXT,
    last_response BLOB,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, status, seq);
CREATE INDEX webhook_deliveries_by_message ON webhook_deliveries (message_id);
CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (updated_at) WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
    delivery_seq INTEGER NOT NULL REFERENCES webhook_deliveries (seq) ON DELETE CASCADE,
    attempted_at INTEGER NOT NULL,
    status INTEGER,
    duration_ms INTEGER NOT NULL,
    error TEXT,
    response BLOB
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_seq, attempted_at);

-- Before the change log's row is replaced, while the resource's previous row (if any) is
-- still there to tell a creation from an update.
CREATE TRIGGER changes_webhook_events BEFORE INSERT ON changes
WHEN EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1)
    AND NOT EXISTS (SELECT 1 FROM changes WHERE type = new.type AND id = new.id AND version = new.version AND deleted = new.deleted)
BEGIN
    INSERT INTO webhook_events (event_type, type, id, version, deleted, changed_at)
    VALUES (
        new.type || CASE WHEN new.deleted = 1 THEN '.deleted'
                         WHEN EXISTS (SELECT 1 FROM changes WHERE type = new.type AND id = new.id AND deleted = 0) THEN '.updated'
                         ELSE '.created' END,
        new.type, new.id, new.version, new.deleted, new.changed_at);
END;

-- A hosted video's outcome, as its item shows it (a job's end, or an upload's expiry).
CREATE TRIGGER playable_items_video_webhook_events AFTER UPDATE OF video ON playable_items
WHEN json_extract(new.video, '$.status') IN ('ready', 'failed')
    AND json_extract(new.video, '$.status') IS NOT json_extract(old.video, '$.status')
    AND EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1)
BEGIN
    INSERT INTO webhook_events (event_type, type, id, version, deleted, changed_at)
    VALUES ('video.' || json_extract(new.video, '$.status'), 'playableItem', new.id, new.version, 0,
            CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
