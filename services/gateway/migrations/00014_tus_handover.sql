-- +goose Up
-- Resumable uploads, issue 19: the lease hand-over and the limits on unfinished uploads.
--
-- release_asked names the lease holder (a running PATCH's lock_owner) that another
-- request for the upload asked to let go. The ask is also notified on the channel
-- shipfile_tus_release (payload: that lock_owner); the holder reads the column at
-- each renewal too, so an ask whose notification was missed still reaches it.
ALTER TABLE tus_uploads ADD COLUMN release_asked uuid;
-- The API token that created an owner's upload (NULL: a browser session, or a link):
-- SHIPFILE_UPLOAD_MAX_OPEN counts unfinished uploads per token, per link and per
-- browser user.
ALTER TABLE tus_uploads ADD COLUMN creator_token_id bigint;
CREATE INDEX tus_uploads_open_token_idx ON tus_uploads (creator_token_id) WHERE NOT file_completed AND creator_token_id IS NOT NULL;
CREATE INDEX tus_uploads_open_user_idx ON tus_uploads (creator_user_id) WHERE NOT file_completed AND creator_token_id IS NULL;
CREATE INDEX tus_uploads_open_link_idx ON tus_uploads (link_hash) WHERE NOT file_completed AND link_hash IS NOT NULL;

-- +goose Down
DROP INDEX tus_uploads_open_link_idx;
DROP INDEX tus_uploads_open_user_idx;
DROP INDEX tus_uploads_open_token_idx;
ALTER TABLE tus_uploads DROP COLUMN creator_token_id;
ALTER TABLE tus_uploads DROP COLUMN release_asked;
