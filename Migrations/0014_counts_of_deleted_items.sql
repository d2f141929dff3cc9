-- An item's counts start again from its own: deleting an item drops the deltas waiting
-- for it, and its ratings removed with it add none (the item is gone when its ratings
-- are deleted), so an item re-created with the same id (an import) never receives the
-- old one's. A viewer's likes removed with the viewer's account still count down.
--
-- view_secret keys the digests of anonymous view sessions and addresses (an HMAC, so a
-- digest cannot be reversed by trying every address without it).

CREATE INDEX item_count_deltas_by_item ON item_count_deltas (item_id);
CREATE TRIGGER playable_items_counts_dropped AFTER DELETE ON playable_items BEGIN
    DELETE FROM item_count_deltas WHERE item_id = old.id;
END;
DROP TRIGGER viewer_ratings_unliked;
CREATE TRIGGER viewer_ratings_unliked AFTER DELETE ON viewer_ratings
WHEN old.liked = 1 AND EXISTS (SELECT 1 FROM playable_items WHERE id = old.item_id) BEGIN
    INSERT INTO item_count_deltas (item_id, likes, views) VALUES (old.item_id, -1, 0);
END;
INSERT INTO catalog_metadata (key, value) VALUES ('view_secret', lower(hex(randomblob(32))));
