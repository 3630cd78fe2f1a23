-- +goose Up
-- A session begun through the OpenID provider keeps the identity it came from and the
-- provider's refresh token, sealed under SHIPFILE_SECRET_KEY (secretbox: 'sbx1:…'),
-- so the gateway asks the provider again every SHIPFILE_OIDC_RECHECK whether the
-- person may still sign in and with which groups. oidc_check_at is when the next
-- check is due; a check claims its session by moving it forward (one instance checks
-- a session once per interval). A session without oidc_check_at is a password one.
ALTER TABLE web_sessions
    ADD COLUMN oidc_issuer   text,
    ADD COLUMN oidc_subject  text,
    ADD COLUMN oidc_refresh  text,
    ADD COLUMN oidc_check_at timestamptz;
CREATE INDEX web_sessions_oidc_check_idx ON web_sessions (oidc_check_at) WHERE oidc_check_at IS NOT NULL;

-- A sign-in at the provider started from the account page links the identity to the
-- signed-in user (link_user_id) instead of signing in.
ALTER TABLE oidc_logins ADD COLUMN link_user_id bigint;

-- Security notices to a user about their own account (an SSO identity linked or
-- unlinked, a role changed, the encryption key set or replaced), written in the
-- transaction of the change and sent by the mailer whatever the notification
-- settings say, one e-mail each.
CREATE TABLE account_notices (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    event       text        NOT NULL CHECK (event IN ('sso_linked', 'sso_unlinked', 'role_changed', 'key_changed')),
    -- What the e-mail names beside the event: the provider, the old and new role.
    detail      text        NOT NULL DEFAULT '',
    state       text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed', 'dropped')),
    due_at      timestamptz NOT NULL DEFAULT now(),
    attempts    int         NOT NULL DEFAULT 0,
    last_error  text        NOT NULL DEFAULT '',
    message_id  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
CREATE INDEX account_notices_due_idx ON account_notices (due_at) WHERE state = 'pending';
CREATE INDEX account_notices_user_idx ON account_notices (user_id);

-- +goose Down
DROP TABLE account_notices;
ALTER TABLE oidc_logins DROP COLUMN link_user_id;
DROP INDEX web_sessions_oidc_check_idx;
ALTER TABLE web_sessions DROP COLUMN oidc_check_at, DROP COLUMN oidc_refresh,
    DROP COLUMN oidc_subject, DROP COLUMN oidc_issuer;
