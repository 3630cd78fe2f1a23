-- +goose Up
-- Each user's language (docs/WEB-UI.md, "Languages"): the pages they see when this
-- browser has not picked one, and the e-mails about their packages and account. A code
-- of pkg/i18n's languages; NULL: the pages follow the browser (Accept-Language or the
-- switcher's cookie) and the e-mails are English.
ALTER TABLE users
    ADD COLUMN language text CHECK (language ~ '^[a-z]{2,3}$');

-- +goose Down
ALTER TABLE users DROP COLUMN language;
