-- Playlists with ordered entries, and comments on playable items.

CREATE TABLE playlists (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL COLLATE NOCASE,
    description TEXT NOT NULL,
    entry_count INTEGER NOT NULL DEFAULT 0 CHECK (entry_count >= 0),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX playlists_by_created ON playlists (created_at, id);
CREATE INDEX playlists_by_title ON playlists (title, id);

CREATE VIRTUAL TABLE playlists_fts USING fts5 (
    title, description,
    content = 'playlists', content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER playlists_fts_insert AFTER INSERT ON playlists BEGIN
    INSERT INTO playlists_fts (rowid, title, description) VALUES (new.pk, new.title, new.description);
END;
CREATE TRIGGER playlists_fts_delete AFTER DELETE ON playlists BEGIN
    INSERT INTO playlists_fts (playlists_fts, rowid, title, description) VALUES ('delete', old.pk, old.title, old.description);
END;
CREATE TRIGGER playlists_fts_update AFTER UPDATE OF title, description ON playlists BEGIN
    INSERT INTO playlists_fts (playlists_fts, rowid, title, description) VALUES ('delete', old.pk, old.title, old.description);
    INSERT INTO playlists_fts (rowid, title, description) VALUES (new.pk, new.title, new.description);
END;

-- One row per entry. Positions are dense (0…entry_count−1) within a playlist; the
-- store keeps them so inside each write transaction. The order index is not UNIQUE
-- because a move shifts a range of positions in one UPDATE, whose rows SQLite
-- checks one at a time.
CREATE TABLE playlist_entries (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    playlist_pk INTEGER NOT NULL REFERENCES playlists (pk) ON DELETE CASCADE,
    item_pk INTEGER NOT NULL REFERENCES playable_items (pk) ON DELETE CASCADE,
    position INTEGER NOT NULL CHECK (position >= 0),
    created_at INTEGER NOT NULL
);
CREATE INDEX playlist_entries_by_position ON playlist_entries (playlist_pk, position);
CREATE INDEX playlist_entries_by_item ON playlist_entries (item_pk, playlist_pk);

-- Comments and their replies (one level). A deleted comment that still has replies
-- stays as a tombstone: deleted = 1, body NULL.
CREATE TABLE comments (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    playable_item_id TEXT NOT NULL REFERENCES playable_items (id) ON DELETE CASCADE,
    parent_id TEXT REFERENCES comments (id) ON DELETE CASCADE,
    author TEXT NOT NULL,
    body TEXT,
    deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
    reply_count INTEGER NOT NULL DEFAULT 0 CHECK (reply_count >= 0),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL,
    CHECK ((deleted = 1) = (body IS NULL))
);
-- Threads page by (created_at, id); the same indexes serve the foreign-key cascades.
CREATE INDEX comments_by_item ON comments (playable_item_id, parent_id, created_at, id);
CREATE INDEX comments_by_parent ON comments (parent_id, created_at, id);
