-- Prefix indexes for two- and three-character search prefixes: a short prefix such as
-- "sa*" is then one index lookup instead of a scan over every term it expands to.
-- (One-character words are matched whole; see SearchQuery.) The tables are rebuilt
-- from their content tables; the triggers that keep them in sync name them and go on.
DROP TABLE playable_items_fts;
CREATE VIRTUAL TABLE playable_items_fts USING fts5 (
    title, description,
    content = 'playable_items', content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2',
    prefix = '2 3'
);
INSERT INTO playable_items_fts (playable_items_fts) VALUES ('rebuild');

DROP TABLE games_fts;
CREATE VIRTUAL TABLE games_fts USING fts5 (
    name, description,
    content = 'games', content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2',
    prefix = '2 3'
);
INSERT INTO games_fts (games_fts) VALUES ('rebuild');

DROP TABLE playlists_fts;
CREATE VIRTUAL TABLE playlists_fts USING fts5 (
    title, description,
    content = 'playlists', content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2',
    prefix = '2 3'
);
INSERT INTO playlists_fts (playlists_fts) VALUES ('rebuild');
