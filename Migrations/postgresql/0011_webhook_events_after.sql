-- As Migrations/0018_webhook_events_after.sql. Every transaction that writes an event
-- holds the change log's lock until it commits (its trigger takes it, and the service's
-- writers take it when they begin, 0002_change_log.sql), and so does the write that sets
-- `events_after`: every event numbered at or below it was committed before, every later
-- one after.
ALTER TABLE webhooks ADD COLUMN events_after BIGINT NOT NULL DEFAULT 0;
