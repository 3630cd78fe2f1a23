-- +goose Up
-- Image previews (docs/WEB-UI.md, "Previews"): a JPEG of at most 1024 px a side, made
-- by the gateway's preview consumer after the scan, stored beside the file's object
-- under preview_key (the object key + '.preview.jpg'); NULL while there is none (not
-- an image, over the pixel limit, an encrypted package, not made yet).
ALTER TABLE files
    ADD COLUMN preview_key    text UNIQUE,
    ADD COLUMN preview_width  int,
    ADD COLUMN preview_height int;

-- A preview goes with its file's object: whenever the object is queued for deletion
-- (a file removed, a package deleted or expired: every path queues the object key),
-- or the file row is deleted, its preview's key is queued too, in the same
-- transaction.
-- +goose StatementBegin
CREATE FUNCTION queue_preview_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'files' THEN
        IF OLD.preview_key IS NOT NULL THEN
            INSERT INTO object_deletions (object_key) VALUES (OLD.preview_key) ON CONFLICT DO NOTHING;
        END IF;
        RETURN OLD;
    END IF;
    INSERT INTO object_deletions (object_key)
    SELECT f.preview_key FROM files f WHERE f.object_key = NEW.object_key AND f.preview_key IS NOT NULL
    ON CONFLICT DO NOTHING;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER files_preview_deleted AFTER DELETE ON files
    FOR EACH ROW WHEN (OLD.preview_key IS NOT NULL) EXECUTE FUNCTION queue_preview_deletion();
CREATE TRIGGER object_deletions_preview AFTER INSERT ON object_deletions
    FOR EACH ROW EXECUTE FUNCTION queue_preview_deletion();

-- +goose Down
DROP TRIGGER object_deletions_preview ON object_deletions;
DROP TRIGGER files_preview_deleted ON files;
DROP FUNCTION queue_preview_deletion();
ALTER TABLE files DROP COLUMN preview_height, DROP COLUMN preview_width, DROP COLUMN preview_key;
