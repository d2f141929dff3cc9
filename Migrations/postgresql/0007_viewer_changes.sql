-- Each viewer's own change log, as Migrations/0013_viewer_changes.sql makes it for
-- SQLite. Its `seq` comes from the catalog log's sequence and its writers take the catalog
-- log's lock (see 0002_change_log.sql), so `seq` order is commit order here too, and each
-- such transaction notifies `catalog_changes`.

CREATE TABLE viewer_changes (
    seq BIGINT PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('progress', 'favorite', 'rating')),
    key TEXT COLLATE "C" NOT NULL,
    deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
    changed_at BIGINT NOT NULL,
    UNIQUE (user_id, kind, key)
);
CREATE INDEX viewer_changes_by_viewer ON viewer_changes (user_id, seq);
CREATE INDEX viewer_changes_tombstones ON viewer_changes (changed_at) WHERE deleted = 1;
INSERT INTO catalog_metadata (key, value) VALUES ('viewer_changes_purged_through', '0');

CREATE FUNCTION catalog_log_viewer_change(viewer TEXT, state_kind TEXT, state_key TEXT, is_deleted INTEGER) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7031950146);
    INSERT INTO viewer_changes (seq, user_id, kind, key, deleted, changed_at)
    VALUES (nextval('changes_seq'), viewer, state_kind, state_key, is_deleted, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
    ON CONFLICT (user_id, kind, key) DO UPDATE SET seq = excluded.seq, deleted = excluded.deleted, changed_at = excluded.changed_at;
    PERFORM pg_notify('catalog_changes', '');
END $$;

-- TG_ARGV: the kind. A deletion because the account is deleted logs nothing.
CREATE FUNCTION catalog_viewer_state_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    state_key TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM users WHERE id = OLD.user_id) THEN
            RETURN NULL;
        END IF;
        -- Each field is read only where the table has it (a record's missing field is an error).
        IF TG_ARGV[0] = 'favorite' THEN
            state_key := OLD.resource_type || ':' || OLD.resource_id;
        ELSE
            state_key := OLD.item_id;
        END IF;
        PERFORM catalog_log_viewer_change(OLD.user_id, TG_ARGV[0], state_key, 1);
    ELSE
        IF TG_ARGV[0] = 'favorite' THEN
            state_key := NEW.resource_type || ':' || NEW.resource_id;
        ELSE
            state_key := NEW.item_id;
        END IF;
        PERFORM catalog_log_viewer_change(NEW.user_id, TG_ARGV[0], state_key, 0);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER viewer_progress_logged AFTER INSERT OR UPDATE OR DELETE ON viewer_progress FOR EACH ROW EXECUTE FUNCTION catalog_viewer_state_changed('progress');
CREATE TRIGGER viewer_ratings_logged AFTER INSERT OR UPDATE OR DELETE ON viewer_ratings FOR EACH ROW EXECUTE FUNCTION catalog_viewer_state_changed('rating');
CREATE TRIGGER viewer_favorites_logged AFTER INSERT OR DELETE ON viewer_favorites FOR EACH ROW EXECUTE FUNCTION catalog_viewer_state_changed('favorite');

CREATE FUNCTION catalog_viewer_changes_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM viewer_changes WHERE user_id = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER users_viewer_changes_deleted AFTER DELETE ON users FOR EACH ROW EXECUTE FUNCTION catalog_viewer_changes_deleted();

INSERT INTO viewer_changes (seq, user_id, kind, key, deleted, changed_at)
    SELECT nextval('changes_seq'), user_id, kind, key, 0, at FROM (
        SELECT user_id, 'progress' AS kind, item_id AS key, watched_at AS at FROM viewer_progress
        UNION ALL SELECT user_id, 'rating', item_id, rated_at FROM viewer_ratings
        UNION ALL SELECT user_id, 'favorite', resource_type || ':' || resource_id, favorited_at FROM viewer_favorites
        ORDER BY at) s;
