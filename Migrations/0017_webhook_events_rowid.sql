-- Webhook events numbered by their rowid, not AUTOINCREMENT: the insert is in every
-- change's transaction while an endpoint is enabled, AUTOINCREMENT writes sqlite_sequence
-- in each, and a number is never needed again once its event is dispatched.
--
-- The table is made again under its name. A rename checks every trigger against the
-- schema, so the two triggers that write it are dropped first and made again after, as
-- 0016 made them.

DROP TRIGGER changes_webhook_events;
DROP TRIGGER playable_items_video_webhook_events;

CREATE TABLE webhook_events_renumbered (
    seq INTEGER PRIMARY KEY,
    event_type TEXT NOT NULL,
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    version INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    changed_at INTEGER NOT NULL
);
INSERT INTO webhook_events_renumbered (seq, event_type, type, id, version, deleted, changed_at)
    SELECT seq, event_type, type, id, version, deleted, changed_at FROM webhook_events;
DROP TABLE webhook_events;
ALTER TABLE webhook_events_renumbered RENAME TO webhook_events;

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
