-- Images on resources, as Migrations/0010_images.sql makes them for SQLite: `images`
-- records each stored original (named by its SHA-256) and when it was last uploaded or last
-- stopped being shown (`touched_at`, which the triggers below keep); each resource's `image`
-- holds the JSON object documents show, with `image_url` computed from it.

CREATE TABLE images (
    hash TEXT COLLATE "C" PRIMARY KEY,
    content_type TEXT NOT NULL,
    byte_size BIGINT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    blur_hash TEXT NOT NULL,
    uploaded_by TEXT COLLATE "C" REFERENCES users (id) ON DELETE SET NULL,
    touched_at BIGINT NOT NULL
);
CREATE INDEX images_by_uploader ON images (uploaded_by) WHERE uploaded_by IS NOT NULL;
CREATE INDEX images_by_touched ON images (touched_at);

CREATE FUNCTION catalog_image_released() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.image_url IS NOT NULL AND (TG_OP = 'DELETE' OR NEW.image_url IS DISTINCT FROM OLD.image_url) THEN
        UPDATE images SET touched_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint WHERE hash = substr(OLD.image_url, 12);
    END IF;
    RETURN NULL;
END $$;

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

CREATE TRIGGER games_image_released AFTER UPDATE OF image OR DELETE ON games FOR EACH ROW EXECUTE FUNCTION catalog_image_released();
CREATE TRIGGER playable_items_image_released AFTER UPDATE OF image OR DELETE ON playable_items FOR EACH ROW EXECUTE FUNCTION catalog_image_released();
CREATE TRIGGER playlists_image_released AFTER UPDATE OF image OR DELETE ON playlists FOR EACH ROW EXECUTE FUNCTION catalog_image_released();
CREATE TRIGGER users_image_released AFTER UPDATE OF image OR DELETE ON users FOR EACH ROW EXECUTE FUNCTION catalog_image_released();
