-- Favorites, ratings and an item's likes and views, as Migrations/0012_viewer_state.sql
-- makes them for SQLite.

ALTER TABLE playable_items ADD COLUMN like_count BIGINT NOT NULL DEFAULT 0, ADD COLUMN view_count BIGINT NOT NULL DEFAULT 0;

-- An item's counts change without a new version: not a change of the item.
DROP TRIGGER playable_items_changes ON playable_items;
CREATE TRIGGER playable_items_changes AFTER INSERT OR DELETE ON playable_items
    FOR EACH ROW EXECUTE FUNCTION catalog_change_row('playableItem', 'subject');
CREATE TRIGGER playable_items_changes_update AFTER UPDATE ON playable_items
    FOR EACH ROW WHEN (NOT (OLD.version = NEW.version AND (OLD.like_count, OLD.view_count) IS DISTINCT FROM (NEW.like_count, NEW.view_count)))
    EXECUTE FUNCTION catalog_change_row('playableItem', 'subject');

CREATE TABLE item_count_deltas (
    seq BIGSERIAL PRIMARY KEY,
    item_id TEXT COLLATE "C" NOT NULL,
    likes INTEGER NOT NULL,
    views INTEGER NOT NULL
);

CREATE TABLE viewer_favorites (
    user_id TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    resource_type TEXT COLLATE "C" NOT NULL CHECK (resource_type IN ('playableItem', 'game', 'playlist')),
    resource_id TEXT COLLATE "C" NOT NULL,
    favorited_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, resource_type, resource_id)
);
CREATE INDEX viewer_favorites_recent ON viewer_favorites (user_id, favorited_at, resource_type, resource_id);
CREATE INDEX viewer_favorites_by_resource ON viewer_favorites (resource_id);
CREATE FUNCTION catalog_unfavorite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM viewer_favorites WHERE resource_id = OLD.id AND resource_type = TG_ARGV[0];
    RETURN NULL;
END $$;
CREATE TRIGGER playable_items_unfavorited AFTER DELETE ON playable_items FOR EACH ROW EXECUTE FUNCTION catalog_unfavorite('playableItem');
CREATE TRIGGER games_unfavorited AFTER DELETE ON games FOR EACH ROW EXECUTE FUNCTION catalog_unfavorite('game');
CREATE TRIGGER playlists_unfavorited AFTER DELETE ON playlists FOR EACH ROW EXECUTE FUNCTION catalog_unfavorite('playlist');

CREATE TABLE viewer_ratings (
    user_id TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    item_id TEXT COLLATE "C" NOT NULL REFERENCES playable_items (id) ON DELETE CASCADE,
    liked INTEGER NOT NULL CHECK (liked IN (0, 1)),
    rated_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, item_id)
);
CREATE INDEX viewer_ratings_by_item ON viewer_ratings (item_id);
CREATE FUNCTION catalog_count_likes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta INTEGER := (CASE WHEN TG_OP = 'DELETE' THEN 0 ELSE NEW.liked END) - (CASE WHEN TG_OP = 'INSERT' THEN 0 ELSE OLD.liked END);
BEGIN
    IF delta <> 0 THEN
        INSERT INTO item_count_deltas (item_id, likes, views) VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.item_id ELSE NEW.item_id END, delta, 0);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER viewer_ratings_counted AFTER INSERT OR UPDATE OF liked OR DELETE ON viewer_ratings FOR EACH ROW EXECUTE FUNCTION catalog_count_likes();

CREATE TABLE item_views (
    item_id TEXT COLLATE "C" NOT NULL REFERENCES playable_items (id) ON DELETE CASCADE,
    viewer TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" REFERENCES users (id) ON DELETE CASCADE,
    address TEXT COLLATE "C",
    counted_at BIGINT NOT NULL,
    PRIMARY KEY (item_id, viewer)
);
CREATE INDEX item_views_by_address ON item_views (item_id, address, counted_at) WHERE address IS NOT NULL;
CREATE INDEX item_views_by_time ON item_views (counted_at);
CREATE INDEX item_views_by_user ON item_views (user_id) WHERE user_id IS NOT NULL;
CREATE FUNCTION catalog_count_view() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO item_count_deltas (item_id, likes, views) VALUES (NEW.item_id, 0, 1);
    RETURN NULL;
END $$;
CREATE TRIGGER item_views_counted AFTER INSERT OR UPDATE OF counted_at ON item_views FOR EACH ROW EXECUTE FUNCTION catalog_count_view();
