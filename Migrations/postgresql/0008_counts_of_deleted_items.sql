-- As Migrations/0014_counts_of_deleted_items.sql for SQLite.

CREATE INDEX item_count_deltas_by_item ON item_count_deltas (item_id);
CREATE FUNCTION catalog_drop_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM item_count_deltas WHERE item_id = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER playable_items_counts_dropped AFTER DELETE ON playable_items FOR EACH ROW EXECUTE FUNCTION catalog_drop_counts();

CREATE OR REPLACE FUNCTION catalog_count_likes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta INTEGER := (CASE WHEN TG_OP = 'DELETE' THEN 0 ELSE NEW.liked END) - (CASE WHEN TG_OP = 'INSERT' THEN 0 ELSE OLD.liked END);
BEGIN
    IF delta <> 0 AND (TG_OP <> 'DELETE' OR EXISTS (SELECT 1 FROM playable_items WHERE id = OLD.item_id)) THEN
        INSERT INTO item_count_deltas (item_id, likes, views) VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.item_id ELSE NEW.item_id END, delta, 0);
    END IF;
    RETURN NULL;
END $$;

INSERT INTO catalog_metadata (key, value) VALUES ('view_secret', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
