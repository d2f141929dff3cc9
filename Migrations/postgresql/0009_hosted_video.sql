-- Hosted video, as Migrations/0015_hosted_video.sql makes it for SQLite (see there for
-- the states a row goes through). Workers claim queued jobs with FOR UPDATE SKIP LOCKED,
-- so each runs on one replica at a time.

CREATE TABLE videos (
    id TEXT COLLATE "C" PRIMARY KEY,
    item_id TEXT COLLATE "C" NOT NULL,
    uploaded_by TEXT COLLATE "C" REFERENCES users (id) ON DELETE SET NULL,
    state TEXT NOT NULL CHECK (state IN ('uploading', 'queued', 'processing', 'ready', 'failed', 'released')),
    upload_length BIGINT NOT NULL,
    upload_offset BIGINT NOT NULL DEFAULT 0,
    upload_metadata TEXT NOT NULL DEFAULT '',
    store_upload TEXT,
    parts TEXT NOT NULL DEFAULT '',
    next_part INTEGER NOT NULL DEFAULT 1,
    tail_size BIGINT NOT NULL DEFAULT 0,
    locked_by TEXT,
    locked_until BIGINT,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    updated_at BIGINT NOT NULL
);
CREATE INDEX videos_uploading_by_user ON videos (uploaded_by) WHERE state = 'uploading';
CREATE INDEX videos_by_state ON videos (state, updated_at);
CREATE INDEX videos_by_item ON videos (item_id);

ALTER TABLE playable_items ADD COLUMN video TEXT,
    ADD COLUMN video_poster_url TEXT COLLATE "C" GENERATED ALWAYS AS ((video::jsonb) -> 'poster' ->> 'url') STORED;
CREATE INDEX playable_items_by_video_poster ON playable_items (video_poster_url) WHERE video_poster_url IS NOT NULL;

CREATE FUNCTION catalog_videos_released() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE videos SET state = 'released', updated_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    WHERE item_id = OLD.id AND state <> 'released';
    RETURN NULL;
END $$;
CREATE TRIGGER playable_items_videos_released AFTER DELETE ON playable_items FOR EACH ROW EXECUTE FUNCTION catalog_videos_released();
