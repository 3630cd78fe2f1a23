-- +goose Up
-- Resumable uploads (tus 1.0.0). One row per upload: who may write it, how far it is,
-- where its bytes are (an S3 multipart upload plus, between PATCHes, a tail object
-- smaller than S3's minimum part), and the SHA-256 state of every stored byte, so any
-- gateway instance, or one restarted, can answer HEAD and go on with PATCH.
CREATE TABLE tus_uploads (
    id              uuid PRIMARY KEY,
    -- No foreign key: an upload outlives its package only until the sweep ends it,
    -- and the sweep must still find the multipart upload to abort.
    package_id      uuid        NOT NULL,
    uploaded_by     text        NOT NULL CHECK (uploaded_by IN ('owner', 'recipient')),
    creator_user_id bigint,
    link_hash       bytea,
    file_id         uuid        NOT NULL UNIQUE,
    filename        text        NOT NULL,
    content_type    text        NOT NULL,
    length          bigint      NOT NULL CHECK (length >= 0),
    "offset"        bigint      NOT NULL DEFAULT 0 CHECK ("offset" >= 0 AND "offset" <= length),
    object_key      text        NOT NULL UNIQUE,
    s3_upload_id    text        NOT NULL DEFAULT '',
    -- [{"n": part number, "etag": "...", "crc": "...", "size": bytes}], in order.
    parts           jsonb       NOT NULL DEFAULT '[]',
    -- Bytes after the last part, kept as the object tail_key while no PATCH runs.
    tail_key        text        NOT NULL DEFAULT '',
    tail_size       bigint      NOT NULL DEFAULT 0,
    -- crypto/sha256 digest state (encoding.BinaryMarshaler) over the first "offset" bytes.
    sha256_state    bytea       NOT NULL,
    -- The PATCH that holds the upload: a lease renewed while it runs, so a crashed
    -- gateway's lease runs out by itself.
    lock_owner      uuid,
    lock_until      timestamptz,
    file_completed  boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Unfinished uploads end SHIPFILE_UPLOAD_RESUME_WINDOW after their last PATCH.
    expires_at      timestamptz NOT NULL
);
CREATE INDEX tus_uploads_package_idx ON tus_uploads (package_id);
CREATE INDEX tus_uploads_expires_idx ON tus_uploads (expires_at);

-- +goose Down
DROP TABLE tus_uploads;
