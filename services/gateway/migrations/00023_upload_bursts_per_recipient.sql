-- +goose Up
-- An inbound package's upload notifications: one open burst per recipient, so that the
-- owner's e-mail "Bob uploaded 2 files" lists Bob's files alone (docs/API.md, "Several
-- recipients": notifications name the recipient). A package with one recipient has
-- one burst, as before.
DROP INDEX owner_notifications_open_burst_idx;
CREATE UNIQUE INDEX owner_notifications_open_burst_idx ON owner_notifications (package_id, lower(recipient_email))
    WHERE kind = 'uploads' AND state = 'open';

-- +goose Down
-- One open burst per package again: the others are closed (sent at the next tick).
UPDATE owner_notifications n SET state = 'pending', updated_at = now()
WHERE n.kind = 'uploads' AND n.state = 'open' AND EXISTS (
    SELECT 1 FROM owner_notifications o
    WHERE o.package_id = n.package_id AND o.kind = 'uploads' AND o.state = 'open' AND o.id < n.id);
DROP INDEX owner_notifications_open_burst_idx;
CREATE UNIQUE INDEX owner_notifications_open_burst_idx ON owner_notifications (package_id)
    WHERE kind = 'uploads' AND state = 'open';
