-- The change log behind GET /v1/changes (as SQLite's 0006_change_log.sql): one row per
-- resource, holding its latest change; every write moves the row of the resource it
-- touches to a new, higher `seq`, so reading from `seq` 0 is a snapshot of the catalog.
-- Triggers write it in the same transaction as the change they describe.
--
-- Sequence order must be commit order, or a reader could pass a `seq` whose transaction
-- has not committed yet and never see it. So a transaction that logs a change first takes
-- one transaction-scoped advisory lock, held until it commits: the log has one writer at
-- a time across every replica, and what a reader sees of it is always a prefix. (The
-- service's writers take the same lock when they begin, before any row lock, so waiting
-- for it never closes a deadlock.) Each such transaction also notifies `catalog_changes`,
-- which wakes long-polls and event streams on every replica once it commits.

CREATE SEQUENCE changes_seq;

CREATE TABLE changes (
    seq BIGINT PRIMARY KEY,
    type TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
    subject TEXT COLLATE "C",
    owner_id TEXT COLLATE "C",
    hidden INTEGER NOT NULL DEFAULT 0 CHECK (hidden IN (0, 1)),
    shown INTEGER NOT NULL DEFAULT 1 CHECK (shown IN (0, 1)),
    changed_at BIGINT NOT NULL,
    UNIQUE (type, id)
);
CREATE INDEX changes_by_subject ON changes (subject, seq) WHERE subject IS NOT NULL;
CREATE INDEX changes_tombstones ON changes (changed_at) WHERE deleted = 1;

CREATE FUNCTION catalog_log_change(kind TEXT, row_id TEXT, row_version BIGINT, is_deleted INTEGER, row_subject TEXT,
                                   row_owner TEXT, is_hidden INTEGER, is_shown INTEGER) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7031950146);
    INSERT INTO changes (seq, type, id, version, deleted, subject, owner_id, hidden, shown, changed_at)
    VALUES (nextval('changes_seq'), kind, row_id, row_version, is_deleted, row_subject, row_owner, is_hidden, is_shown,
            (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
    ON CONFLICT (type, id) DO UPDATE SET seq = excluded.seq, version = excluded.version, deleted = excluded.deleted,
        subject = excluded.subject, owner_id = excluded.owner_id, hidden = excluded.hidden, shown = excluded.shown,
        changed_at = excluded.changed_at;
    PERFORM pg_notify('catalog_changes', '');
END $$;

-- Games, locations and playable items (TG_ARGV: the type; 'subject' to record the row's id as its subject).
CREATE FUNCTION catalog_change_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM catalog_log_change(TG_ARGV[0], OLD.id, OLD.version + 1, 1, CASE WHEN TG_NARGS > 1 THEN OLD.id END, NULL, 0, 1);
    ELSE
        PERFORM catalog_log_change(TG_ARGV[0], NEW.id, NEW.version, 0, CASE WHEN TG_NARGS > 1 THEN NEW.id END, NULL, 0, 1);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION catalog_change_comment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM catalog_log_change('comment', OLD.id, OLD.version + 1, 1, OLD.playable_item_id, NULL, 0, 1);
    ELSE
        PERFORM catalog_log_change('comment', NEW.id, NEW.version, 0, NEW.playable_item_id, NULL, 0, 1);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION catalog_change_playlist() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_shown INTEGER;
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM catalog_log_change('playlist', NEW.id, NEW.version, 0, NULL, NEW.owner_id, (NEW.visibility = 'private')::int,
                                   (NEW.visibility = 'public')::int);
        RETURN NULL;
    END IF;
    SELECT coalesce(max(shown), 0) INTO was_shown FROM changes WHERE type = 'playlist' AND id = OLD.id;
    IF TG_OP = 'DELETE' THEN
        PERFORM catalog_log_change('playlist', OLD.id, OLD.version + 1, 1, NULL, OLD.owner_id, (OLD.visibility = 'private')::int,
                                   greatest((OLD.visibility = 'public')::int, was_shown));
    ELSE
        PERFORM catalog_log_change('playlist', NEW.id, NEW.version, 0, NULL, NEW.owner_id, (NEW.visibility = 'private')::int,
                                   greatest((NEW.visibility = 'public')::int, (OLD.visibility = 'public')::int, was_shown));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER games_changes AFTER INSERT OR UPDATE OR DELETE ON games FOR EACH ROW EXECUTE FUNCTION catalog_change_row('game');
CREATE TRIGGER locations_changes AFTER INSERT OR UPDATE OR DELETE ON locations FOR EACH ROW EXECUTE FUNCTION catalog_change_row('location');
CREATE TRIGGER playable_items_changes AFTER INSERT OR UPDATE OR DELETE ON playable_items
    FOR EACH ROW EXECUTE FUNCTION catalog_change_row('playableItem', 'subject');
CREATE TRIGGER comments_changes AFTER INSERT OR UPDATE OR DELETE ON comments FOR EACH ROW EXECUTE FUNCTION catalog_change_comment();
CREATE TRIGGER playlists_changes AFTER INSERT OR UPDATE OR DELETE ON playlists FOR EACH ROW EXECUTE FUNCTION catalog_change_playlist();

-- What exists already is the log's first snapshot, in the order an import needs.
INSERT INTO changes (seq, type, id, version, changed_at)
    SELECT nextval('changes_seq'), 'game', id, version, (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM (SELECT id, version FROM games ORDER BY pk) g;
INSERT INTO changes (seq, type, id, version, changed_at)
    SELECT nextval('changes_seq'), 'location', id, version, (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM (SELECT id, version FROM locations ORDER BY pk) l;
INSERT INTO changes (seq, type, id, version, subject, changed_at)
    SELECT nextval('changes_seq'), 'playableItem', id, version, id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM (SELECT id, version FROM playable_items ORDER BY pk) i;
INSERT INTO changes (seq, type, id, version, owner_id, hidden, shown, changed_at)
    SELECT nextval('changes_seq'), 'playlist', id, version, owner_id, (visibility = 'private')::int, (visibility = 'public')::int,
           (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM (SELECT id, version, owner_id, visibility FROM playlists ORDER BY pk) p;
INSERT INTO changes (seq, type, id, version, subject, changed_at)
    SELECT nextval('changes_seq'), 'comment', id, version, playable_item_id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM (SELECT id, version, playable_item_id FROM comments ORDER BY parent_id IS NOT NULL, pk) c;

-- Tokens name the catalog they came from: a token from another database is refused.
INSERT INTO catalog_metadata (key, value) VALUES ('catalog_id', replace(gen_random_uuid()::text, '-', ''));
INSERT INTO catalog_metadata (key, value) VALUES ('changes_purged_through', '0');
