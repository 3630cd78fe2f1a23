package db

// RecordAttemptsSQL is the statement of RecordAttempts, for the store's group commit,
// which sends it in one pipeline with the transaction that sets its plan cache mode
// (store.Postgres.RecordAttempts). Not generated: sqlc leaves this file alone.
const RecordAttemptsSQL = recordAttempts

// OrderFinishManySQL is the statement of OrderFinishMany, sent in the same pipeline and
// transaction as RecordAttemptsSQL.
const OrderFinishManySQL = orderFinishMany
