-- +goose Up
-- End-to-end encryption with age (docs/ENCRYPTION.md). The
-- server stores ciphertext only: what it keeps here is what it needs to serve it.

-- A package's encryption, fixed at creation: 'age' packages hold only age v1 files.
-- file_seq numbers the files the package has recorded (file-1.age, file-2.age, …): a
-- file removed from a draft leaves its number unused, so names stay unique.
ALTER TABLE packages
    ADD COLUMN encryption text NOT NULL DEFAULT 'none' CHECK (encryption IN ('none', 'age')),
    ADD COLUMN file_seq   int  NOT NULL DEFAULT 0 CHECK (file_seq >= 0);

-- A file of an 'age' package is ciphertext (encrypted), with a neutral name; an upload
-- through a request link may carry its own encrypted manifest entry (an age file of at
-- most 8 KiB, sealed to the owner's public key).
ALTER TABLE files
    ADD COLUMN encrypted boolean NOT NULL DEFAULT false,
    ADD COLUMN manifest  bytea CHECK (length(manifest) <= 8192);
ALTER TABLE tus_uploads
    ADD COLUMN manifest  bytea CHECK (length(manifest) <= 8192);

-- The encrypted manifest of an outbound 'age' package (names, types and sizes of its
-- files), an age file the server cannot read; replaced while the package is a draft.
CREATE TABLE package_manifests (
    package_id uuid        PRIMARY KEY REFERENCES packages (id) ON DELETE CASCADE,
    data       bytea       NOT NULL CHECK (length(data) <= 1048576),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A user's age key pair for file requests: the public key (age1…) the request page
-- encrypts to, and the private key sealed with the user's passphrase (an armored age
-- file with one scrypt stanza), which the server cannot open.
CREATE TABLE user_keys (
    user_id         bigint      PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    public_key      text        NOT NULL,
    sealed_identity text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE user_keys;
DROP TABLE package_manifests;
ALTER TABLE tus_uploads DROP COLUMN manifest;
ALTER TABLE files DROP COLUMN manifest, DROP COLUMN encrypted;
ALTER TABLE packages DROP COLUMN file_seq, DROP COLUMN encryption;
