-- An endpoint gets the changes committed once it exists (or, enabled again, once it is
-- enabled), never the events still waiting from before: `events_after` is the highest
-- waiting event's seq when it was made or enabled, and the dispatcher matches it only
-- with later ones. Events are numbered by rowid (0017), which starts again at 1 once the
-- table is empty, so the dispatcher sets it back to 0 as soon as no event at or below it
-- waits.
ALTER TABLE webhooks ADD COLUMN events_after INTEGER NOT NULL DEFAULT 0;
