-- +goose Up
-- An encrypted file request keeps the age public key (age1…) it was created with: the
-- request page and the link's answer give that key to the uploader, so a later change
-- of the owner's key (user_keys) never redirects an open request. Only an inbound 'age'
-- package has one.
ALTER TABLE packages
    ADD COLUMN public_key text
        CHECK (public_key IS NULL OR (encryption = 'age' AND direction = 'inbound'));

-- The requests that take uploads (draft or active) get their owner's current key, the
-- one their uploads are encrypted to at the upgrade.
UPDATE packages p SET public_key = k.public_key
FROM user_keys k
WHERE k.user_id = p.owner_user_id
  AND p.encryption = 'age' AND p.direction = 'inbound' AND p.state IN ('draft', 'active');

-- +goose Down
ALTER TABLE packages DROP COLUMN public_key;
