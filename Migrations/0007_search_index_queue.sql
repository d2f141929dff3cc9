-- Full-text index writes wait in a queue until the end of the writer's batch, which
-- applies all of them with one statement per index, in order, in the same transaction
-- (SearchIndexQueue in CatalogStore): readers never see a row without its terms.
--
-- SQLite 3.40's FTS5 writes its pending terms to disk as a new segment at the end of
-- every statement and savepoint that touched it, so a trigger that indexes each row
-- made one segment per write, and the merges that segments call for: about a million
-- instructions for each created item. A batch now makes one segment per index.
--
-- `command` is 'delete' to remove a row's old terms (an external-content index needs the
-- text it indexed), NULL to add its terms; `first` and `second` are the two indexed
-- columns' text. Rows written by another program wait until the server's next batch,
-- or its next start.

CREATE TABLE search_index_queue (
    seq INTEGER PRIMARY KEY,
    index_name TEXT NOT NULL,
    command TEXT CHECK (command IS NULL OR command = 'delete'),
    row INTEGER NOT NULL,
    first TEXT,
    second TEXT
);

DROP TRIGGER playable_items_fts_insert;
DROP TRIGGER playable_items_fts_delete;
DROP TRIGGER playable_items_fts_update;
CREATE TRIGGER playable_items_fts_insert AFTER INSERT ON playable_items BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playable_items_fts', NULL, new.pk, new.title, new.description);
END;
CREATE TRIGGER playable_items_fts_delete AFTER DELETE ON playable_items BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playable_items_fts', 'delete', old.pk, old.title, old.description);
END;
CREATE TRIGGER playable_items_fts_update AFTER UPDATE OF title, description ON playable_items BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playable_items_fts', 'delete', old.pk, old.title, old.description);
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playable_items_fts', NULL, new.pk, new.title, new.description);
END;

DROP TRIGGER games_fts_insert;
DROP TRIGGER games_fts_delete;
DROP TRIGGER games_fts_update;
CREATE TRIGGER games_fts_insert AFTER INSERT ON games BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('games_fts', NULL, new.pk, new.name, new.description);
END;
CREATE TRIGGER games_fts_delete AFTER DELETE ON games BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('games_fts', 'delete', old.pk, old.name, old.description);
END;
CREATE TRIGGER games_fts_update AFTER UPDATE OF name, description ON games BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('games_fts', 'delete', old.pk, old.name, old.description);
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('games_fts', NULL, new.pk, new.name, new.description);
END;

DROP TRIGGER playlists_fts_insert;
DROP TRIGGER playlists_fts_delete;
DROP TRIGGER playlists_fts_update;
CREATE TRIGGER playlists_fts_insert AFTER INSERT ON playlists BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playlists_fts', NULL, new.pk, new.title, new.description);
END;
CREATE TRIGGER playlists_fts_delete AFTER DELETE ON playlists BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playlists_fts', 'delete', old.pk, old.title, old.description);
END;
CREATE TRIGGER playlists_fts_update AFTER UPDATE OF title, description ON playlists BEGIN
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playlists_fts', 'delete', old.pk, old.title, old.description);
    INSERT INTO search_index_queue (index_name, command, row, first, second) VALUES ('playlists_fts', NULL, new.pk, new.title, new.description);
END;
