-- Each viewer's progress in each playable item, as Migrations/0011_viewer_progress.sql
-- makes it for SQLite.

CREATE TABLE viewer_progress (
    user_id TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    item_id TEXT COLLATE "C" NOT NULL REFERENCES playable_items (id) ON DELETE CASCADE,
    position_seconds DOUBLE PRECISION NOT NULL,
    duration_seconds DOUBLE PRECISION,
    played INTEGER NOT NULL CHECK (played IN (0, 1)),
    play_count INTEGER NOT NULL,
    watched_at BIGINT NOT NULL,
    device_id TEXT NOT NULL,
    begun INTEGER NOT NULL CHECK (begun IN (0, 1)),
    version BIGINT NOT NULL,
    PRIMARY KEY (user_id, item_id)
);
CREATE INDEX viewer_progress_continue ON viewer_progress (user_id, watched_at, item_id) WHERE begun = 1;
CREATE INDEX viewer_progress_by_item ON viewer_progress (item_id);
