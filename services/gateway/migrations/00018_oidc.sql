-- +goose Up
-- Sign-in through the organization's OpenID provider (docs/WEB-UI.md, "Signing in
-- with the organization's accounts"): a user is found by (issuer, sub), stored with the user.
ALTER TABLE users ADD COLUMN oidc_issuer text, ADD COLUMN oidc_subject text,
    ADD CONSTRAINT users_oidc_both CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));
CREATE UNIQUE INDEX users_oidc_key ON users (oidc_issuer, oidc_subject) WHERE oidc_subject IS NOT NULL;

-- Sign-ins under way at the provider: the state (its SHA-256; the browser holds the
-- value in a cookie), the nonce and the PKCE verifier. A callback takes its row
-- (DELETE … RETURNING), so a replayed callback finds none.
CREATE TABLE oidc_logins (
    state_hash bytea PRIMARY KEY,
    nonce      text        NOT NULL,
    verifier   text        NOT NULL,
    next       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oidc_logins_created_idx ON oidc_logins (created_at);

-- +goose Down
DROP TABLE oidc_logins;
DROP INDEX users_oidc_key;
ALTER TABLE users DROP CONSTRAINT users_oidc_both, DROP COLUMN oidc_subject, DROP COLUMN oidc_issuer;
