-- Hosted video (issue 36). Each upload is a row of `videos`, named by a random id that
-- also names its files in the media store (`uploads/{id}` while it arrives on local disk,
-- `videos/{id}/…` once it has), and the row goes on through processing:
--   uploading   bytes arrive (tus or the IETF resumable-upload draft); upload_offset is
--               durable (written only after the bytes are synced), expires_at ends it;
--   queued      the upload finished: a job waits for a worker;
--   processing  a worker (locked_by) holds it until locked_until, renewed while it runs;
--               past that, another worker takes it again (attempts counts them);
--   ready / failed   done; the item's `video` member shows the outcome;
--   released    replaced by a later upload, or its item deleted: its files are removed
--               (once no request or worker holds it any more).
-- While an upload is being written, locked_by/locked_until hold it for that request, so
-- two writers never append at once. On S3, store_upload is the multipart upload, parts
-- the parts kept so far ("number etag size" lines), and tail_size the bytes after them,
-- kept as an object of their own until a whole part is there.

CREATE TABLE videos (
    id TEXT PRIMARY KEY,
    item_id TEXT NOT NULL,
    uploaded_by TEXT REFERENCES users (id) ON DELETE SET NULL,
    state TEXT NOT NULL CHECK (state IN ('uploading', 'queued', 'processing', 'ready', 'failed', 'released')),
    upload_length INTEGER NOT NULL,
    upload_offset INTEGER NOT NULL DEFAULT 0,
    upload_metadata TEXT NOT NULL DEFAULT '',
    store_upload TEXT,
    parts TEXT NOT NULL DEFAULT '',
    next_part INTEGER NOT NULL DEFAULT 1,
    tail_size INTEGER NOT NULL DEFAULT 0,
    locked_by TEXT,
    locked_until INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    updated_at INTEGER NOT NULL
);
CREATE INDEX videos_uploading_by_user ON videos (uploaded_by) WHERE state = 'uploading';
CREATE INDEX videos_by_state ON videos (state, updated_at);
CREATE INDEX videos_by_item ON videos (item_id);

ALTER TABLE playable_items ADD COLUMN video TEXT;
-- A ready video's poster is an image like any other (its record, its sweep): the column
-- computed from the member finds the items that show it.
ALTER TABLE playable_items ADD COLUMN video_poster_url TEXT GENERATED ALWAYS AS (json_extract(video, '$.poster.url')) VIRTUAL;
CREATE INDEX playable_items_by_video_poster ON playable_items (video_poster_url) WHERE video_poster_url IS NOT NULL;

-- A deleted item's videos are released (their files go with the next sweep).
CREATE TRIGGER playable_items_videos_released AFTER DELETE ON playable_items BEGIN
    UPDATE videos SET state = 'released', updated_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    WHERE item_id = old.id AND state <> 'released';
END;
