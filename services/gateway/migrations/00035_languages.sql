-- +goose Up
-- Each recipient's language (docs/API.md, "Recipients' languages"): their e-mail and
-- the page their link opens are written in it. A code of pkg/i18n's languages; the
-- recipients that were there before speak English.
ALTER TABLE recipients
    ADD COLUMN language text NOT NULL DEFAULT 'en' CHECK (language ~ '^[a-z]{2,3}$');

-- +goose Down
ALTER TABLE recipients DROP COLUMN language;
