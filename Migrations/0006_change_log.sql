-- The change log behind GET /v1/changes: one row per resource (game, playable item,
-- location, playlist, comment), holding its latest change. Every write moves the row
-- of the resource it touches to a new, higher `seq` (REPLACE deletes the old row), so
-- the log never holds more rows than resources plus tombstones, and reading it from
-- `seq` 0 is a snapshot of the whole catalog. The triggers below write it in the same
-- transaction as the change they describe, whichever code path (or tool) made it.
-- AUTOINCREMENT keeps `seq` increasing for ever, never reusing a number.
--
-- `deleted` rows are tombstones (`version` is the deleted row's version + 1); they are
-- purged after the retention (`--change-retention`), and `changes_purged_through` in
-- catalog_metadata records the highest purged `seq`: a token below it has missed a
-- deletion and must resync. `subject` is the playable item a comment is on (an item's
-- own id), for `playableItemId=`. For playlists, `owner_id` and `hidden` (private now)
-- say who may see the row, and `shown` whether it was ever public (a playlist that turns
-- private is a deletion to those who no longer see it; one never public is not shown).

CREATE TABLE changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    version INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
    subject TEXT,
    owner_id TEXT,
    hidden INTEGER NOT NULL DEFAULT 0 CHECK (hidden IN (0, 1)),
    shown INTEGER NOT NULL DEFAULT 1 CHECK (shown IN (0, 1)),
    changed_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX changes_by_resource ON changes (type, id);
CREATE INDEX changes_by_subject ON changes (subject, seq) WHERE subject IS NOT NULL;
CREATE INDEX changes_tombstones ON changes (changed_at) WHERE deleted = 1;

CREATE TRIGGER games_changes_insert AFTER INSERT ON games BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('game', new.id, new.version, 0, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER games_changes_update AFTER UPDATE ON games BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('game', new.id, new.version, 0, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER games_changes_delete AFTER DELETE ON games BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('game', old.id, old.version + 1, 1, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

CREATE TRIGGER locations_changes_insert AFTER INSERT ON locations BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('location', new.id, new.version, 0, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER locations_changes_update AFTER UPDATE ON locations BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('location', new.id, new.version, 0, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER locations_changes_delete AFTER DELETE ON locations BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('location', old.id, old.version + 1, 1, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

CREATE TRIGGER playable_items_changes_insert AFTER INSERT ON playable_items BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('playableItem', new.id, new.version, 0, new.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER playable_items_changes_update AFTER UPDATE ON playable_items BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('playableItem', new.id, new.version, 0, new.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER playable_items_changes_delete AFTER DELETE ON playable_items BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('playableItem', old.id, old.version + 1, 1, old.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

CREATE TRIGGER comments_changes_insert AFTER INSERT ON comments BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('comment', new.id, new.version, 0, new.playable_item_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER comments_changes_update AFTER UPDATE ON comments BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('comment', new.id, new.version, 0, new.playable_item_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER comments_changes_delete AFTER DELETE ON comments BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('comment', old.id, old.version + 1, 1, old.playable_item_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

CREATE TRIGGER playlists_changes_insert AFTER INSERT ON playlists BEGIN
    REPLACE INTO changes (type, id, version, deleted, owner_id, hidden, shown, changed_at)
    VALUES ('playlist', new.id, new.version, 0, new.owner_id, new.visibility = 'private', new.visibility = 'public', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER playlists_changes_update AFTER UPDATE ON playlists BEGIN
    REPLACE INTO changes (type, id, version, deleted, owner_id, hidden, shown, changed_at)
    VALUES ('playlist', new.id, new.version, 0, new.owner_id, new.visibility = 'private',
            new.visibility = 'public' OR old.visibility = 'public' OR coalesce((SELECT shown FROM changes WHERE type = 'playlist' AND id = new.id), 0), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER playlists_changes_delete AFTER DELETE ON playlists BEGIN
    REPLACE INTO changes (type, id, version, deleted, owner_id, hidden, shown, changed_at)
    VALUES ('playlist', old.id, old.version + 1, 1, old.owner_id, old.visibility = 'private',
            old.visibility = 'public' OR coalesce((SELECT shown FROM changes WHERE type = 'playlist' AND id = old.id), 0), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

-- What exists already is the log's first snapshot, in the order an import needs.
INSERT INTO changes (type, id, version, changed_at) SELECT 'game', id, version, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) FROM games ORDER BY pk;
INSERT INTO changes (type, id, version, changed_at) SELECT 'location', id, version, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) FROM locations ORDER BY pk;
INSERT INTO changes (type, id, version, subject, changed_at) SELECT 'playableItem', id, version, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) FROM playable_items ORDER BY pk;
INSERT INTO changes (type, id, version, owner_id, hidden, shown, changed_at)
    SELECT 'playlist', id, version, owner_id, visibility = 'private', visibility = 'public', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) FROM playlists ORDER BY pk;
INSERT INTO changes (type, id, version, subject, changed_at)
    SELECT 'comment', id, version, playable_item_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) FROM comments ORDER BY parent_id IS NOT NULL, pk;

-- Tokens name the catalog they came from: a token from another database is refused.
INSERT INTO catalog_metadata (key, value) VALUES ('catalog_id', lower(hex(randomblob(16))));
INSERT INTO catalog_metadata (key, value) VALUES ('changes_purged_through', '0');
