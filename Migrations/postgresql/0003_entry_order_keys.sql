-- Playlist entries are ordered by a sparse key instead of a dense position, and each
-- entry has a row of its own in the change log (as SQLite's 0009_entry_order_keys.sql,
-- which says why and how). Every replica must run this version: one from before reads
-- `position`, which is gone.

-- The log's lock first: entries logged below get their `seq` while no other writer can.
SELECT pg_advisory_xact_lock(7031950146);

DROP INDEX playlist_entries_by_position;
ALTER TABLE playlist_entries RENAME COLUMN position TO sort_key;
ALTER TABLE playlist_entries ALTER COLUMN sort_key TYPE BIGINT USING (sort_key::bigint + 1) * 4294967296;
ALTER TABLE playlist_entries ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
CREATE INDEX playlist_entries_by_key ON playlist_entries (playlist_pk, sort_key);

-- The entries a statement added, moved (gave another key) or removed, logged in one
-- statement (from its transition table), so that a whole new order costs one insert into
-- the log rather than a call per entry. An entry deleted with its playlist (by cascade,
-- after the playlist's row is gone) logs nothing: its playlist's deletion says it.
CREATE FUNCTION catalog_log_entries(entry_ids TEXT[], entry_versions BIGINT[], playlist_pks BIGINT[], is_deleted INTEGER)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(entry_ids), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(7031950146);
    INSERT INTO changes (seq, type, id, version, deleted, subject, owner_id, hidden, shown, changed_at)
    SELECT nextval('changes_seq'), 'playlistEntry', e.id, e.version + is_deleted, is_deleted, p.id, p.owner_id,
           (p.visibility = 'private')::int, 0, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM unnest(entry_ids, entry_versions, playlist_pks) WITH ORDINALITY AS e(id, version, playlist_pk, n)
    JOIN playlists p ON p.pk = e.playlist_pk ORDER BY e.n
    ON CONFLICT (type, id) DO UPDATE SET seq = excluded.seq, version = excluded.version, deleted = excluded.deleted,
        subject = excluded.subject, owner_id = excluded.owner_id, hidden = excluded.hidden, shown = excluded.shown,
        changed_at = excluded.changed_at;
    PERFORM pg_notify('catalog_changes', '');
END $$;

CREATE FUNCTION catalog_change_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM catalog_log_entries(array_agg(id ORDER BY sort_key), array_agg(version ORDER BY sort_key), array_agg(playlist_pk ORDER BY sort_key), 0)
        FROM added_entries;
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM catalog_log_entries(array_agg(n.id ORDER BY n.sort_key), array_agg(n.version ORDER BY n.sort_key),
                                    array_agg(n.playlist_pk ORDER BY n.sort_key), 0)
        FROM moved_entries n JOIN previous_entries o ON o.pk = n.pk WHERE n.sort_key IS DISTINCT FROM o.sort_key;
    ELSE
        PERFORM catalog_log_entries(array_agg(id), array_agg(version), array_agg(playlist_pk), 1) FROM removed_entries;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER playlist_entries_added AFTER INSERT ON playlist_entries REFERENCING NEW TABLE AS added_entries
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_change_entries();
CREATE TRIGGER playlist_entries_moved AFTER UPDATE ON playlist_entries REFERENCING OLD TABLE AS previous_entries NEW TABLE AS moved_entries
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_change_entries();
CREATE TRIGGER playlist_entries_removed AFTER DELETE ON playlist_entries REFERENCING OLD TABLE AS removed_entries
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_change_entries();

-- A playlist that stops being private (or changes owner while private) logs its entries
-- anew; one that turns private hides its entries' rows where they are; a deleted one
-- takes its entries' rows with it.
CREATE FUNCTION catalog_change_playlist_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM changes WHERE subject = OLD.id AND type = 'playlistEntry';
        RETURN NULL;
    END IF;
    IF OLD.visibility <> 'private' AND NEW.visibility = 'private' THEN
        UPDATE changes SET hidden = 1, owner_id = NEW.owner_id WHERE subject = NEW.id AND type = 'playlistEntry';
    END IF;
    IF (OLD.visibility = 'private' AND NEW.visibility <> 'private') OR (NEW.visibility = 'private' AND OLD.owner_id IS DISTINCT FROM NEW.owner_id) THEN
        PERFORM catalog_log_entries(array_agg(id ORDER BY sort_key), array_agg(version ORDER BY sort_key), array_agg(playlist_pk ORDER BY sort_key), 0)
        FROM playlist_entries WHERE playlist_pk = NEW.pk;
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
