-- What else each viewer keeps (favorites, ratings) and what every viewer adds up to
-- (an item's likes and views).
--
-- Counts never make viewers wait on one hot row: a rating or a counted view appends a
-- row to item_count_deltas (by the triggers below), and the server adds the deltas to the
-- items' like_count and view_count in batches, every two seconds. An item's counts
-- change without a new version: that is not a change of the item, so it is not logged.

ALTER TABLE playable_items ADD COLUMN like_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE playable_items ADD COLUMN view_count INTEGER NOT NULL DEFAULT 0;

DROP TRIGGER playable_items_changes_update;
CREATE TRIGGER playable_items_changes_update AFTER UPDATE ON playable_items
WHEN NOT (old.version IS new.version AND (old.like_count IS NOT new.like_count OR old.view_count IS NOT new.view_count)) BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('playableItem', new.id, new.version, 0, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

CREATE TABLE item_count_deltas (
    seq INTEGER PRIMARY KEY,
    item_id TEXT NOT NULL,
    likes INTEGER NOT NULL,
    views INTEGER NOT NULL
);

-- A viewer's favorite items, games and playlists: at most 10,000 a viewer (the server
-- checks), gone with the viewer or with the resource.
CREATE TABLE viewer_favorites (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    resource_type TEXT NOT NULL CHECK (resource_type IN ('playableItem', 'game', 'playlist')),
    resource_id TEXT NOT NULL,
    favorited_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, resource_type, resource_id)
) WITHOUT ROWID;
CREATE INDEX viewer_favorites_recent ON viewer_favorites (user_id, favorited_at, resource_type, resource_id);
CREATE INDEX viewer_favorites_by_resource ON viewer_favorites (resource_id);
CREATE TRIGGER playable_items_unfavorited AFTER DELETE ON playable_items BEGIN
    DELETE FROM viewer_favorites WHERE resource_id = old.id AND resource_type = 'playableItem';
END;
CREATE TRIGGER games_unfavorited AFTER DELETE ON games BEGIN
    DELETE FROM viewer_favorites WHERE resource_id = old.id AND resource_type = 'game';
END;
CREATE TRIGGER playlists_unfavorited AFTER DELETE ON playlists BEGIN
    DELETE FROM viewer_favorites WHERE resource_id = old.id AND resource_type = 'playlist';
END;

-- A viewer's rating of an item: liked 1 (like) or 0 (dislike); no row is no rating.
-- Every like given or taken back, by the viewer, by deleting the account or the item,
-- is a delta of the item's like_count.
CREATE TABLE viewer_ratings (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    item_id TEXT NOT NULL REFERENCES playable_items (id) ON DELETE CASCADE,
    liked INTEGER NOT NULL CHECK (liked IN (0, 1)),
    rated_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, item_id)
) WITHOUT ROWID;
CREATE INDEX viewer_ratings_by_item ON viewer_ratings (item_id);
CREATE TRIGGER viewer_ratings_liked AFTER INSERT ON viewer_ratings WHEN new.liked = 1 BEGIN
    INSERT INTO item_count_deltas (item_id, likes, views) VALUES (new.item_id, 1, 0);
END;
CREATE TRIGGER viewer_ratings_changed AFTER UPDATE OF liked ON viewer_ratings WHEN old.liked IS NOT new.liked BEGIN
    INSERT INTO item_count_deltas (item_id, likes, views) VALUES (new.item_id, new.liked - old.liked, 0);
END;
CREATE TRIGGER viewer_ratings_unliked AFTER DELETE ON viewer_ratings WHEN old.liked = 1 BEGIN
    INSERT INTO item_count_deltas (item_id, likes, views) VALUES (old.item_id, -1, 0);
END;

-- The last counted view of an item by each viewer (`user:<id>`) or anonymous session
-- (`session:<digest>`, with a digest of its address): a view counts once a day. Rows
-- older than a day are removed by the server; a viewer's go with the account.
CREATE TABLE item_views (
    item_id TEXT NOT NULL REFERENCES playable_items (id) ON DELETE CASCADE,
    viewer TEXT NOT NULL,
    user_id TEXT REFERENCES users (id) ON DELETE CASCADE,
    address TEXT,
    counted_at INTEGER NOT NULL,
    PRIMARY KEY (item_id, viewer)
) WITHOUT ROWID;
CREATE INDEX item_views_by_address ON item_views (item_id, address, counted_at) WHERE address IS NOT NULL;
CREATE INDEX item_views_by_time ON item_views (counted_at);
CREATE INDEX item_views_by_user ON item_views (user_id) WHERE user_id IS NOT NULL;
CREATE TRIGGER item_views_counted AFTER INSERT ON item_views BEGIN
    INSERT INTO item_count_deltas (item_id, likes, views) VALUES (new.item_id, 0, 1);
END;
CREATE TRIGGER item_views_counted_again AFTER UPDATE OF counted_at ON item_views BEGIN
    INSERT INTO item_count_deltas (item_id, likes, views) VALUES (new.item_id, 0, 1);
END;
