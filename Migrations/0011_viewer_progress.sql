-- Each viewer's progress in each playable item (PUT /v1/me/progress/{id}): one row per
-- (user, item), written by the rule in CatalogModels' ProgressRules (the latest playback
-- wins). `watched_at` is the playback's time (the player's clock, clamped to the server's);
-- `begun` says whether the item belongs in "Continue watching" (begun, not finished), so
-- that row reads as one index range, most recent first. A user's rows go with the user,
-- an item's with the item.

CREATE TABLE viewer_progress (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    item_id TEXT NOT NULL REFERENCES playable_items (id) ON DELETE CASCADE,
    position_seconds REAL NOT NULL,
    duration_seconds REAL,
    played INTEGER NOT NULL CHECK (played IN (0, 1)),
    play_count INTEGER NOT NULL,
    watched_at INTEGER NOT NULL,
    device_id TEXT NOT NULL,
    begun INTEGER NOT NULL CHECK (begun IN (0, 1)),
    version INTEGER NOT NULL,
    PRIMARY KEY (user_id, item_id)
) WITHOUT ROWID;
CREATE INDEX viewer_progress_continue ON viewer_progress (user_id, watched_at, item_id) WHERE begun = 1;
CREATE INDEX viewer_progress_by_item ON viewer_progress (item_id);
