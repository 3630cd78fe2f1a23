-- +goose Up
-- An outbound package's 'downloaded' notification: one per recipient, at that
-- recipient's first download ("Bob downloaded Q3 report", then "Carol downloaded Q3
-- report"), instead of one per package naming whoever came first (docs/API.md, "Several
-- recipients": each link is its recipient's). A package with one recipient gets one, as
-- before. Rows written before 00019 have no address: they are the first recipient's, so
-- that recipient's next download adds no second e-mail.
UPDATE owner_notifications n SET recipient_email = r.email
FROM recipients r
WHERE n.kind = 'downloaded' AND n.recipient_email = '' AND r.package_id = n.package_id AND r.position = 0;
DROP INDEX owner_notifications_downloaded_idx;
CREATE UNIQUE INDEX owner_notifications_downloaded_idx ON owner_notifications (package_id, lower(recipient_email))
    WHERE kind = 'downloaded';

-- +goose Down
-- One per package again: the first of each package's stays.
DELETE FROM owner_notifications n
WHERE n.kind = 'downloaded' AND EXISTS (
    SELECT 1 FROM owner_notifications o
    WHERE o.package_id = n.package_id AND o.kind = 'downloaded' AND o.id < n.id);
DROP INDEX owner_notifications_downloaded_idx;
CREATE UNIQUE INDEX owner_notifications_downloaded_idx ON owner_notifications (package_id)
    WHERE kind = 'downloaded';
