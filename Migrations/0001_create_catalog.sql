-- Playable items, games and locations.
-- Every table has an integer `pk` (the stable rowid that the full-text and spatial
-- indexes point at) and a public UUID `id`. Times are milliseconds since 1970, UTC.
-- Name and title columns compare case-insensitively, so sorting by them and paging
-- through them with a cursor use the same order.

CREATE TABLE playable_items (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL COLLATE NOCASE,
    description TEXT NOT NULL,
    stream_url TEXT NOT NULL,
    thumbnail_url TEXT,
    duration_seconds REAL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX playable_items_by_created ON playable_items (created_at, id);
CREATE INDEX playable_items_by_title ON playable_items (title, id);

CREATE VIRTUAL TABLE playable_items_fts USING fts5 (
    title, description,
    content = 'playable_items', content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER playable_items_fts_insert AFTER INSERT ON playable_items BEGIN
    INSERT INTO playable_items_fts (rowid, title, description) VALUES (new.pk, new.title, new.description);
END;
CREATE TRIGGER playable_items_fts_delete AFTER DELETE ON playable_items BEGIN
    INSERT INTO playable_items_fts (playable_items_fts, rowid, title, description) VALUES ('delete', old.pk, old.title, old.description);
END;
CREATE TRIGGER playable_items_fts_update AFTER UPDATE OF title, description ON playable_items BEGIN
    INSERT INTO playable_items_fts (playable_items_fts, rowid, title, description) VALUES ('delete', old.pk, old.title, old.description);
    INSERT INTO playable_items_fts (rowid, title, description) VALUES (new.pk, new.title, new.description);
END;

CREATE TABLE games (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL COLLATE NOCASE,
    description TEXT NOT NULL,
    image_name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX games_by_created ON games (created_at, id);
CREATE INDEX games_by_name ON games (name, id);

CREATE VIRTUAL TABLE games_fts USING fts5 (
    name, description,
    content = 'games', content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER games_fts_insert AFTER INSERT ON games BEGIN
    INSERT INTO games_fts (rowid, name, description) VALUES (new.pk, new.name, new.description);
END;
CREATE TRIGGER games_fts_delete AFTER DELETE ON games BEGIN
    INSERT INTO games_fts (games_fts, rowid, name, description) VALUES ('delete', old.pk, old.name, old.description);
END;
CREATE TRIGGER games_fts_update AFTER UPDATE OF name, description ON games BEGIN
    INSERT INTO games_fts (games_fts, rowid, name, description) VALUES ('delete', old.pk, old.name, old.description);
    INSERT INTO games_fts (rowid, name, description) VALUES (new.pk, new.name, new.description);
END;

CREATE TABLE locations (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL COLLATE NOCASE,
    country_code TEXT NOT NULL,
    latitude REAL NOT NULL CHECK (latitude BETWEEN -90 AND 90),
    longitude REAL NOT NULL CHECK (longitude BETWEEN -180 AND 180),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX locations_by_created ON locations (created_at, id);
CREATE INDEX locations_by_name ON locations (name, id);

-- Spatial index for bbox and near queries (R*Tree boxes are single precision:
-- queries pad them and then filter on the exact columns).
CREATE VIRTUAL TABLE locations_rtree USING rtree (pk, min_lat, max_lat, min_lon, max_lon);
CREATE TRIGGER locations_rtree_insert AFTER INSERT ON locations BEGIN
    INSERT INTO locations_rtree VALUES (new.pk, new.latitude, new.latitude, new.longitude, new.longitude);
END;
CREATE TRIGGER locations_rtree_delete AFTER DELETE ON locations BEGIN
    DELETE FROM locations_rtree WHERE pk = old.pk;
END;
CREATE TRIGGER locations_rtree_update AFTER UPDATE OF latitude, longitude ON locations BEGIN
    UPDATE locations_rtree SET min_lat = new.latitude, max_lat = new.latitude, min_lon = new.longitude, max_lon = new.longitude
    WHERE pk = new.pk;
END;

-- Facts about the catalog itself, such as whether the demo catalog was ever offered.
CREATE TABLE catalog_metadata (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;
