-- Images on resources, as Migrations/0010_images.sql makes them for SQLite: `images`
-- records each stored original (named by its SHA-256), and each resource's `image` holds
-- the JSON object documents show, with `image_url` computed from it for the sweep.

CREATE TABLE images (
    hash TEXT COLLATE "C" PRIMARY KEY,
    content_type TEXT NOT NULL,
    byte_size BIGINT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    blur_hash TEXT NOT NULL,
    uploaded_by TEXT COLLATE "C" REFERENCES users (id) ON DELETE SET NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX images_by_uploader ON images (uploaded_by) WHERE uploaded_by IS NOT NULL;
CREATE INDEX images_by_created ON images (created_at);

ALTER TABLE games ADD COLUMN image TEXT,
    ADD COLUMN image_url TEXT COLLATE "C" GENERATED ALWAYS AS ((image::jsonb) ->> 'url') STORED;
CREATE INDEX games_by_image ON games (image_url) WHERE image_url IS NOT NULL;

ALTER TABLE playable_items ADD COLUMN image TEXT,
    ADD COLUMN image_url TEXT COLLATE "C" GENERATED ALWAYS AS ((image::jsonb) ->> 'url') STORED;
CREATE INDEX playable_items_by_image ON playable_items (image_url) WHERE image_url IS NOT NULL;

ALTER TABLE playlists ADD COLUMN image TEXT,
    ADD COLUMN image_url TEXT COLLATE "C" GENERATED ALWAYS AS ((image::jsonb) ->> 'url') STORED;
CREATE INDEX playlists_by_image ON playlists (image_url) WHERE image_url IS NOT NULL;

ALTER TABLE users ADD COLUMN image TEXT,
    ADD COLUMN image_url TEXT COLLATE "C" GENERATED ALWAYS AS ((image::jsonb) ->> 'url') STORED;
CREATE INDEX users_by_image ON users (image_url) WHERE image_url IS NOT NULL;
