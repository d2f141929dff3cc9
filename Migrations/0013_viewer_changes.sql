-- Each viewer's own change log, behind GET /v1/me/changes: one row per (viewer, kind,
-- key) holding its latest change (as `changes` does for the catalog), so reading a
-- viewer's rows from `seq` 0 is a snapshot of its state. Written by triggers in the same
-- transaction as the state they describe. Kinds and keys: `progress` and `rating` by the
-- item's id, `favorite` by `<type>:<id>`.
--
-- A viewer's state removed because the account is deleted logs nothing (the account is
-- gone first), and the account's rows go with it. A change moves its row to a new `seq`
-- by deleting and inserting it (not REPLACE: a trigger's conflict policy gives way to
-- the statement's, and the state's writes are upserts).

CREATE TABLE viewer_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('progress', 'favorite', 'rating')),
    key TEXT NOT NULL,
    deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
    changed_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX viewer_changes_by_state ON viewer_changes (user_id, kind, key);
CREATE INDEX viewer_changes_by_viewer ON viewer_changes (user_id, seq);
CREATE INDEX viewer_changes_tombstones ON viewer_changes (changed_at) WHERE deleted = 1;
INSERT INTO catalog_metadata (key, value) VALUES ('viewer_changes_purged_through', '0');

CREATE TRIGGER viewer_progress_logged AFTER INSERT ON viewer_progress BEGIN
    DELETE FROM viewer_changes WHERE user_id = new.user_id AND kind = 'progress' AND key = new.item_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (new.user_id, 'progress', new.item_id, 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER viewer_progress_logged_update AFTER UPDATE ON viewer_progress BEGIN
    DELETE FROM viewer_changes WHERE user_id = new.user_id AND kind = 'progress' AND key = new.item_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (new.user_id, 'progress', new.item_id, 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER viewer_progress_logged_delete AFTER DELETE ON viewer_progress WHEN EXISTS (SELECT 1 FROM users WHERE id = old.user_id) BEGIN
    DELETE FROM viewer_changes WHERE user_id = old.user_id AND kind = 'progress' AND key = old.item_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (old.user_id, 'progress', old.item_id, 1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER viewer_ratings_logged AFTER INSERT ON viewer_ratings BEGIN
    DELETE FROM viewer_changes WHERE user_id = new.user_id AND kind = 'rating' AND key = new.item_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (new.user_id, 'rating', new.item_id, 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER viewer_ratings_logged_update AFTER UPDATE ON viewer_ratings BEGIN
    DELETE FROM viewer_changes WHERE user_id = new.user_id AND kind = 'rating' AND key = new.item_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (new.user_id, 'rating', new.item_id, 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER viewer_ratings_logged_delete AFTER DELETE ON viewer_ratings WHEN EXISTS (SELECT 1 FROM users WHERE id = old.user_id) BEGIN
    DELETE FROM viewer_changes WHERE user_id = old.user_id AND kind = 'rating' AND key = old.item_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (old.user_id, 'rating', old.item_id, 1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER viewer_favorites_logged AFTER INSERT ON viewer_favorites BEGIN
    DELETE FROM viewer_changes WHERE user_id = new.user_id AND kind = 'favorite' AND key = new.resource_type || ':' || new.resource_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (new.user_id, 'favorite', new.resource_type || ':' || new.resource_id, 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER viewer_favorites_logged_delete AFTER DELETE ON viewer_favorites WHEN EXISTS (SELECT 1 FROM users WHERE id = old.user_id) BEGIN
    DELETE FROM viewer_changes WHERE user_id = old.user_id AND kind = 'favorite' AND key = old.resource_type || ':' || old.resource_id;
    INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at) VALUES (old.user_id, 'favorite', old.resource_type || ':' || old.resource_id, 1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER users_viewer_changes_deleted AFTER DELETE ON users BEGIN
    DELETE FROM viewer_changes WHERE user_id = old.id;
END;

-- What viewers hold already is their logs' first snapshot.
INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at)
    SELECT user_id, 'progress', item_id, 0, watched_at FROM viewer_progress ORDER BY watched_at;
INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at)
    SELECT user_id, 'rating', item_id, 0, rated_at FROM viewer_ratings ORDER BY rated_at;
INSERT INTO viewer_changes (user_id, kind, key, deleted, changed_at)
    SELECT user_id, 'favorite', resource_type || ':' || resource_id, 0, favorited_at FROM viewer_favorites ORDER BY favorited_at;
