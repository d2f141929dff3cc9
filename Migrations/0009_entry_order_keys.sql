-- Playlist entries are ordered by a sparse key instead of a dense position, so that
-- inserting, moving or removing one entry writes that entry's row alone: a new key
-- falls between its neighbours' (keys start 2^32 apart), and only when two neighbours
-- have no room left between them does the store spread a small window of keys around
-- the place anew (see PlaylistEntryStore). Positions are counted when read.
--
-- Each entry has a row of its own in the change log ('playlistEntry', its id, its
-- playlist's id as `subject`), carrying the entry and its order key, so a change of one
-- entry costs a feed reader one entry, however long the playlist. The row takes its
-- playlist's visibility: `hidden` while the playlist is private (seen by its owner and
-- those who see everything), and `shown` 0, since a playlist's own row says when others
-- lose sight of it (they then drop its entries). When a playlist stops being private, or
-- changes owner while private, its entries are logged anew for those who now see them;
-- when it turns private, its entries' rows are hidden where they are (those who lose
-- sight of them learn it from the playlist's deletion, and nothing new is sent); when it
-- is deleted, its entries' rows go with it.

ALTER TABLE playlist_entries RENAME COLUMN position TO sort_key;
UPDATE playlist_entries SET sort_key = (sort_key + 1) * 4294967296;
ALTER TABLE playlist_entries ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
DROP INDEX playlist_entries_by_position;
CREATE INDEX playlist_entries_by_key ON playlist_entries (playlist_pk, sort_key);

CREATE TRIGGER playlist_entries_changes_insert AFTER INSERT ON playlist_entries BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, owner_id, hidden, shown, changed_at)
    SELECT 'playlistEntry', new.id, new.version, 0, p.id, p.owner_id, p.visibility = 'private', 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM playlists p WHERE p.pk = new.playlist_pk;
END;
CREATE TRIGGER playlist_entries_changes_update AFTER UPDATE OF sort_key ON playlist_entries BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, owner_id, hidden, shown, changed_at)
    SELECT 'playlistEntry', new.id, new.version, 0, p.id, p.owner_id, p.visibility = 'private', 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM playlists p WHERE p.pk = new.playlist_pk;
END;
-- An entry deleted with its playlist (by cascade, after the playlist's row is gone) logs nothing.
CREATE TRIGGER playlist_entries_changes_delete AFTER DELETE ON playlist_entries BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, owner_id, hidden, shown, changed_at)
    SELECT 'playlistEntry', old.id, old.version + 1, 1, p.id, p.owner_id, p.visibility = 'private', 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM playlists p WHERE p.pk = old.playlist_pk;
END;

CREATE TRIGGER playlists_entries_shown_anew AFTER UPDATE OF visibility, owner_id ON playlists
WHEN (old.visibility = 'private' AND new.visibility <> 'private') OR (new.visibility = 'private' AND old.owner_id IS NOT new.owner_id) BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, owner_id, hidden, shown, changed_at)
    SELECT 'playlistEntry', e.id, e.version, 0, new.id, new.owner_id, new.visibility = 'private', 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM playlist_entries e WHERE e.playlist_pk = new.pk ORDER BY e.sort_key;
END;
CREATE TRIGGER playlists_entries_hidden AFTER UPDATE OF visibility ON playlists
WHEN old.visibility <> 'private' AND new.visibility = 'private' BEGIN
    UPDATE changes SET hidden = 1, owner_id = new.owner_id WHERE subject = new.id AND type = 'playlistEntry';
END;
CREATE TRIGGER playlists_entries_gone AFTER DELETE ON playlists BEGIN
    DELETE FROM changes WHERE subject = old.id AND type = 'playlistEntry';
END;

-- The entries that exist already, after everything logged before.
INSERT INTO changes (type, id, version, subject, owner_id, hidden, shown, changed_at)
    SELECT 'playlistEntry', e.id, e.version, p.id, p.owner_id, p.visibility = 'private', 0, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM playlist_entries e JOIN playlists p ON p.pk = e.playlist_pk ORDER BY p.pk, e.sort_key;
