-- As Migrations/0018_webhook_events_after.sql. Event numbers are handed out in the order
-- the inserts run, not the order they commit: the write that sets `events_after` first
-- takes a lock on webhook_events that waits for every transaction that wrote an event and
-- holds back new ones until it commits, so that every event numbered at or below it was
-- committed before, and every later one after.
ALTER TABLE webhooks ADD COLUMN events_after BIGINT NOT NULL DEFAULT 0;
