-- A playable item's own row in the change log no longer repeats the item's id as its
-- `subject`: `playableItemId=` finds that row by (type, id), in changes_by_resource,
-- and the item's comments by subject, as before. Items' new rows then stay out of
-- changes_by_subject, and creating an item writes one index fewer: its end leaves are
-- rewritten on most commits of a batch of creates (about four WAL pages each), since
-- SQLite rebalances an index that grows at its end with its neighbours.
-- Rows logged before this keep their subject; the query finds those by it.

DROP TRIGGER playable_items_changes_insert;
DROP TRIGGER playable_items_changes_update;
DROP TRIGGER playable_items_changes_delete;
CREATE TRIGGER playable_items_changes_insert AFTER INSERT ON playable_items BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('playableItem', new.id, new.version, 0, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER playable_items_changes_update AFTER UPDATE ON playable_items BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('playableItem', new.id, new.version, 0, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER playable_items_changes_delete AFTER DELETE ON playable_items BEGIN
    REPLACE INTO changes (type, id, version, deleted, subject, changed_at) VALUES ('playableItem', old.id, old.version + 1, 1, NULL, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
