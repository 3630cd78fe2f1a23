-- +goose Up
-- Object keys a gateway is about to write: recorded before the object's PUT, removed in
-- the transaction that commits the file row. A reservation older than
-- SHIPFILE_ORPHAN_GRACE with no file row belongs to an upload that never committed (a
-- crash, a failed insert): the expiry service removes its object, then the reservation.
-- An upload in progress renews its reservation (reserved_at) while it streams.
CREATE TABLE object_reservations (
    object_key  text        PRIMARY KEY,
    reserved_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX object_reservations_age_idx ON object_reservations (reserved_at);

-- +goose Down
DROP TABLE object_reservations;
