-- Images on resources: a game's artwork, an item's poster, a playlist's cover, a user's
-- avatar. The bytes live in the media store (a directory, or S3), named by the SHA-256 of
-- the stored original; `images` records each one kept, who uploaded it (their quota) and
-- when (unreferenced images are swept after a grace period). A resource's `image` holds
-- the JSON object documents show; `image_url`, computed from it, finds the resources
-- that reference an image (the sweep, account deletion).

CREATE TABLE images (
    hash TEXT PRIMARY KEY,
    content_type TEXT NOT NULL,
    byte_size INTEGER NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    blur_hash TEXT NOT NULL,
    uploaded_by TEXT REFERENCES users (id) ON DELETE SET NULL,
    touched_at INTEGER NOT NULL
);
CREATE INDEX images_by_uploader ON images (uploaded_by) WHERE uploaded_by IS NOT NULL;
CREATE INDEX images_by_touched ON images (touched_at);

ALTER TABLE games ADD COLUMN image TEXT;
ALTER TABLE games ADD COLUMN image_url TEXT GENERATED ALWAYS AS (json_extract(image, '$.url')) VIRTUAL;
CREATE INDEX games_by_image ON games (image_url) WHERE image_url IS NOT NULL;
CREATE TRIGGER games_image_released AFTER UPDATE OF image ON games WHEN old.image_url IS NOT NULL AND old.image_url IS NOT new.image_url BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;
CREATE TRIGGER games_image_deleted AFTER DELETE ON games WHEN old.image_url IS NOT NULL BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;

ALTER TABLE playable_items ADD COLUMN image TEXT;
ALTER TABLE playable_items ADD COLUMN image_url TEXT GENERATED ALWAYS AS (json_extract(image, '$.url')) VIRTUAL;
CREATE INDEX playable_items_by_image ON playable_items (image_url) WHERE image_url IS NOT NULL;
CREATE TRIGGER playable_items_image_released AFTER UPDATE OF image ON playable_items WHEN old.image_url IS NOT NULL AND old.image_url IS NOT new.image_url BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;
CREATE TRIGGER playable_items_image_deleted AFTER DELETE ON playable_items WHEN old.image_url IS NOT NULL BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;

ALTER TABLE playlists ADD COLUMN image TEXT;
ALTER TABLE playlists ADD COLUMN image_url TEXT GENERATED ALWAYS AS (json_extract(image, '$.url')) VIRTUAL;
CREATE INDEX playlists_by_image ON playlists (image_url) WHERE image_url IS NOT NULL;
CREATE TRIGGER playlists_image_released AFTER UPDATE OF image ON playlists WHEN old.image_url IS NOT NULL AND old.image_url IS NOT new.image_url BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;
CREATE TRIGGER playlists_image_deleted AFTER DELETE ON playlists WHEN old.image_url IS NOT NULL BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;

ALTER TABLE users ADD COLUMN image TEXT;
ALTER TABLE users ADD COLUMN image_url TEXT GENERATED ALWAYS AS (json_extract(image, '$.url')) VIRTUAL;
CREATE INDEX users_by_image ON users (image_url) WHERE image_url IS NOT NULL;
CREATE TRIGGER users_image_released AFTER UPDATE OF image ON users WHEN old.image_url IS NOT NULL AND old.image_url IS NOT new.image_url BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;
CREATE TRIGGER users_image_deleted AFTER DELETE ON users WHEN old.image_url IS NOT NULL BEGIN
    UPDATE images SET touched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE hash = substr(old.image_url, 12);
END;
