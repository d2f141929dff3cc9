-- Playlist entries are ordered by a sparse key instead of a dense position, and each
-- entry has a row of its own in the change log (as SQLite's 0009_entry_order_keys.sql,
-- which says why and how).

ALTER TABLE playlist_entries RENAME COLUMN position TO sort_key;
ALTER TABLE playlist_entries ALTER COLUMN sort_key TYPE BIGINT USING (sort_key::bigint + 1) * 4294967296;
ALTER TABLE playlist_entries ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
DROP INDEX playlist_entries_by_position;
CREATE INDEX playlist_entries_by_key ON playlist_entries (playlist_pk, sort_key);

-- An entry deleted with its playlist (by cascade, after the playlist's row is gone) logs nothing.
CREATE FUNCTION catalog_change_entry() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    playlist RECORD;
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT id, owner_id, visibility INTO playlist FROM playlists WHERE pk = OLD.playlist_pk;
        IF FOUND THEN
            PERFORM catalog_log_change('playlistEntry', OLD.id, OLD.version + 1, 1, playlist.id, playlist.owner_id,
                                       (playlist.visibility = 'private')::int, 0);
        END IF;
    ELSE
        SELECT id, owner_id, visibility INTO playlist FROM playlists WHERE pk = NEW.playlist_pk;
        IF FOUND THEN
            PERFORM catalog_log_change('playlistEntry', NEW.id, NEW.version, 0, playlist.id, playlist.owner_id,
                                       (playlist.visibility = 'private')::int, 0);
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER playlist_entries_changes AFTER INSERT OR DELETE OR UPDATE OF sort_key ON playlist_entries
    FOR EACH ROW EXECUTE FUNCTION catalog_change_entry();

-- A playlist whose visibility changes (or its owner, while it is private) logs its
-- entries anew; a deleted one takes its entries' rows with it.
CREATE FUNCTION catalog_change_playlist_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM changes WHERE subject = OLD.id AND type = 'playlistEntry';
    ELSIF OLD.visibility IS DISTINCT FROM NEW.visibility OR (NEW.visibility = 'private' AND OLD.owner_id IS DISTINCT FROM NEW.owner_id) THEN
        PERFORM catalog_log_change('playlistEntry', e.id, e.version, 0, NEW.id, NEW.owner_id, (NEW.visibility = 'private')::int, 0)
        FROM (SELECT id, version FROM playlist_entries WHERE playlist_pk = NEW.pk ORDER BY sort_key) e;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER playlists_entries_changes AFTER UPDATE OF visibility, owner_id OR DELETE ON playlists
    FOR EACH ROW EXECUTE FUNCTION catalog_change_playlist_entries();

-- The entries that exist already, after everything logged before.
INSERT INTO changes (seq, type, id, version, subject, owner_id, hidden, shown, changed_at)
    SELECT nextval('changes_seq'), 'playlistEntry', id, version, playlist_id, owner_id, hidden, 0, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM (SELECT e.id, e.version, p.id AS playlist_id, p.owner_id, (p.visibility = 'private')::int AS hidden
          FROM playlist_entries e JOIN playlists p ON p.pk = e.playlist_pk ORDER BY p.pk, e.sort_key) e;
