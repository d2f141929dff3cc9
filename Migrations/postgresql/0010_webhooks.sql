-- Webhooks, as Migrations/0016_webhooks.sql makes them for SQLite (see there for how a
-- change becomes deliveries). Senders claim deliveries with FOR UPDATE SKIP LOCKED, so
-- each attempt is made by one replica.

CREATE TABLE webhooks (
    id TEXT COLLATE "C" PRIMARY KEY,
    url TEXT NOT NULL,
    event_types TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    secret BYTEA NOT NULL,
    previous_secret BYTEA,
    previous_secret_expires_at BIGINT,
    failing_since BIGINT,
    disabled_at BIGINT,
    disabled_reason TEXT,
    dropped BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    version BIGINT NOT NULL DEFAULT 1
);

CREATE TABLE webhook_events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_type TEXT COLLATE "C" NOT NULL,
    type TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    changed_at BIGINT NOT NULL
);

CREATE TABLE webhook_messages (
    id TEXT COLLATE "C" PRIMARY KEY,
    event_type TEXT COLLATE "C" NOT NULL,
    body BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE webhook_deliveries (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT COLLATE "C" NOT NULL UNIQUE,
    webhook_id TEXT COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    message_id TEXT COLLATE "C" NOT NULL REFERENCES webhook_messages (id),
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'dropped')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    first_attempt_at BIGINT,
    locked_by TEXT,
    locked_until BIGINT,
    last_attempt_at BIGINT,
    last_status INTEGER,
    last_duration_ms BIGINT,
    last_error TEXT,
    last_response BYTEA,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, status, seq);
CREATE INDEX webhook_deliveries_by_message ON webhook_deliveries (message_id);
CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (updated_at) WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
    delivery_seq BIGINT NOT NULL REFERENCES webhook_deliveries (seq) ON DELETE CASCADE,
    attempted_at BIGINT NOT NULL,
    status INTEGER,
    duration_ms BIGINT NOT NULL,
    error TEXT,
    response BYTEA
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_seq, attempted_at);

-- The change log's row is inserted (a new resource's) or moved to a new seq (an update,
-- or a deletion's tombstone) by catalog_log_change; a move that keeps the version (likes
-- and views added up) makes no event.
CREATE FUNCTION catalog_webhook_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.version = NEW.version AND OLD.deleted = NEW.deleted THEN
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1) THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_events (event_type, type, id, version, deleted, changed_at)
    VALUES (NEW.type || CASE WHEN NEW.deleted = 1 THEN '.deleted' WHEN TG_OP = 'UPDATE' AND OLD.deleted = 0 THEN '.updated' ELSE '.created' END,
            NEW.type, NEW.id, NEW.version, NEW.deleted, NEW.changed_at);
    RETURN NULL;
END $$;
CREATE TRIGGER changes_webhook_events AFTER INSERT OR UPDATE OF seq ON changes FOR EACH ROW EXECUTE FUNCTION catalog_webhook_change();

CREATE FUNCTION catalog_webhook_video() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    status TEXT := NEW.video::jsonb ->> 'status';
BEGIN
    IF status IN ('ready', 'failed') AND status IS DISTINCT FROM (OLD.video::jsonb ->> 'status')
        AND EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1) THEN
        INSERT INTO webhook_events (event_type, type, id, version, deleted, changed_at)
        VALUES ('video.' || status, 'playableItem', NEW.id, NEW.version, 0, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER playable_items_video_webhook_events AFTER UPDATE OF video ON playable_items FOR EACH ROW EXECUTE FUNCTION catalog_webhook_video();
