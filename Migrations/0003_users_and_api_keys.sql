-- Users, their API keys, and who owns comments and playlists.

-- A user is made by an admin, by the bootstrap command, or on the first valid identity
-- token of an (issuer, subject) pair (both NULL for the others).
CREATE TABLE users (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL COLLATE NOCASE,
    avatar_url TEXT,
    email TEXT,
    role TEXT NOT NULL CHECK (role IN ('member', 'editor', 'admin')),
    issuer TEXT,
    subject TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL,
    CHECK ((issuer IS NULL) = (subject IS NULL))
);
CREATE UNIQUE INDEX users_by_identity ON users (issuer, subject) WHERE issuer IS NOT NULL;
CREATE INDEX users_by_created ON users (created_at, id);
CREATE INDEX users_by_display_name ON users (display_name, id);

-- Only the SHA-256 digest of a key's secret is kept, with its first characters (prefix)
-- to tell keys apart. Deleting a user deletes its keys.
CREATE TABLE api_keys (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('member', 'editor', 'admin')),
    prefix TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    expires_at INTEGER,
    last_used_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX api_keys_by_created ON api_keys (created_at, id);
CREATE INDEX api_keys_by_user ON api_keys (user_id, created_at, id);

-- Comments and playlists from before accounts have no owner: only editors change them.
-- The author's display name stays in comments.author; author_deleted marks the comments
-- of a deleted account.
ALTER TABLE comments ADD COLUMN author_id TEXT REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE comments ADD COLUMN author_deleted INTEGER NOT NULL DEFAULT 0 CHECK (author_deleted IN (0, 1));
CREATE INDEX comments_by_author ON comments (author_id) WHERE author_id IS NOT NULL;

ALTER TABLE playlists ADD COLUMN owner_id TEXT REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE playlists ADD COLUMN visibility TEXT NOT NULL DEFAULT 'public' CHECK (visibility IN ('public', 'private'));
CREATE INDEX playlists_by_owner ON playlists (owner_id) WHERE owner_id IS NOT NULL;
