-- +goose Up
-- Web UI sign-in sessions. The cookie carries a random id; only its SHA-256 is stored,
-- so a database dump does not hand out sessions.
CREATE TABLE web_sessions (
    id_hash      bytea PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX web_sessions_user_idx ON web_sessions (user_id);
CREATE INDEX web_sessions_expires_idx ON web_sessions (expires_at);

-- Failed sign-in attempts, counted per key ('email:<lower-case address>' or 'ip:<address>')
-- in a fixed window; kept in PostgreSQL so every gateway instance sees the same count.
CREATE TABLE login_throttle (
    key             text PRIMARY KEY,
    failures        int         NOT NULL DEFAULT 0,
    window_start    timestamptz NOT NULL DEFAULT now(),
    locked_until    timestamptz
);

-- +goose Down
DROP TABLE login_throttle;
DROP TABLE web_sessions;
