-- The change log's rows for new games, locations and playable items, written once a
-- statement rather than once a row: one trigger call and one INSERT into `changes` for
-- all the rows a statement adds (the writers send creates taken together as one INSERT of
-- several rows). The rows are logged in the order the statement added them, each with a
-- seq of its own, as catalog_log_change logs one: the same lock first, the same
-- notification after (none when the statement added nothing). Deletions (and updates)
-- stay logged a row at a time. The seqs follow the rows' order because the INSERT below
-- scans the transition table as it is, with nothing to reorder it (no join, no sort).

-- The log's lock first, as every writer takes it before any table lock: the triggers'
-- tables are locked below, which would otherwise deadlock with a writer of a replica still
-- running that holds one of them and waits for another.
SELECT pg_advisory_xact_lock(7031950146);

CREATE FUNCTION catalog_change_rows_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    added_count BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(7031950146);
    INSERT INTO changes (seq, type, id, version, deleted, subject, owner_id, hidden, shown, changed_at)
    SELECT nextval('changes_seq'), TG_ARGV[0], added.id, added.version, 0, CASE WHEN TG_NARGS > 1 THEN added.id END, NULL, 0, 1,
           (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM added_rows added
    ON CONFLICT (type, id) DO UPDATE SET seq = excluded.seq, version = excluded.version, deleted = excluded.deleted,
        subject = excluded.subject, owner_id = excluded.owner_id, hidden = excluded.hidden, shown = excluded.shown,
        changed_at = excluded.changed_at;
    GET DIAGNOSTICS added_count = ROW_COUNT;
    IF added_count > 0 THEN
        PERFORM pg_notify('catalog_changes', '');
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER games_changes ON games;
CREATE TRIGGER games_changes AFTER UPDATE OR DELETE ON games FOR EACH ROW EXECUTE FUNCTION catalog_change_row('game');
CREATE TRIGGER games_changes_added AFTER INSERT ON games REFERENCING NEW TABLE AS added_rows
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_change_rows_added('game');

DROP TRIGGER locations_changes ON locations;
CREATE TRIGGER locations_changes AFTER UPDATE OR DELETE ON locations FOR EACH ROW EXECUTE FUNCTION catalog_change_row('location');
CREATE TRIGGER locations_changes_added AFTER INSERT ON locations REFERENCING NEW TABLE AS added_rows
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_change_rows_added('location');

DROP TRIGGER playable_items_changes ON playable_items;
CREATE TRIGGER playable_items_changes AFTER DELETE ON playable_items
    FOR EACH ROW EXECUTE FUNCTION catalog_change_row('playableItem', 'subject');
CREATE TRIGGER playable_items_changes_added AFTER INSERT ON playable_items REFERENCING NEW TABLE AS added_rows
    FOR EACH STATEMENT EXECUTE FUNCTION catalog_change_rows_added('playableItem', 'subject');
