-- Credentials remembered by replicas. Each server remembers the keys and identity tokens it
-- has checked; any change that could make one of them wrong (a key revoked or changed, a
-- user deleted or given another role or identity) moves `credential_generation` in its
-- own transaction and notifies `catalog_credentials`. Every server that remembers keeps a
-- row in `credential_replicas`: the generation whose changes it has applied (`seen`) and
-- until when it may go on using what it remembers without renewing the row
-- (`alive_until`, milliseconds by the database's clock). The write that changed a
-- credential answers once every live server has seen its generation, or that server's
-- row has lapsed (and with it, by its own clock and earlier, its right to remember).
CREATE TABLE credential_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL
);
INSERT INTO credential_generation (id, generation) VALUES (1, 1);

CREATE TABLE credential_replicas (
    replica TEXT COLLATE "C" PRIMARY KEY,
    seen BIGINT NOT NULL,
    alive_until BIGINT NOT NULL
);

CREATE FUNCTION catalog_credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE credential_generation SET generation = generation + 1 WHERE id = 1;
    PERFORM pg_notify('catalog_credentials', '');
    RETURN NULL;
END $$;

CREATE TRIGGER api_keys_deleted_credentials AFTER DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION catalog_credentials_changed();
CREATE TRIGGER api_keys_changed_credentials AFTER UPDATE ON api_keys FOR EACH ROW
    WHEN (OLD.role IS DISTINCT FROM NEW.role OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
          OR OLD.user_id IS DISTINCT FROM NEW.user_id OR OLD.secret_hash IS DISTINCT FROM NEW.secret_hash)
    EXECUTE FUNCTION catalog_credentials_changed();
CREATE TRIGGER users_deleted_credentials AFTER DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION catalog_credentials_changed();
CREATE TRIGGER users_changed_credentials AFTER UPDATE ON users FOR EACH ROW
    WHEN (OLD.role IS DISTINCT FROM NEW.role OR OLD.issuer IS DISTINCT FROM NEW.issuer
          OR OLD.subject IS DISTINCT FROM NEW.subject OR OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION catalog_credentials_changed();
