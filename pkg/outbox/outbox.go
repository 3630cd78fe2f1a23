// Package outbox is shipfile's transactional outbox. A service writes the messages it
// means to publish into the outbox table in the same PostgreSQL transaction as the state
// change they announce (Insert); a Relay publishes committed rows to NATS JetStream with
// their id as Nats-Msg-Id and deletes them. A message is therefore published if
// and only if its transaction commits — at least once, and exactly once as far as the
// stream's duplicate window reaches.
//
// Nothing in the writer's transaction wakes the relay: a NOTIFY there would take
// PostgreSQL's database-wide notification lock at commit and hold it through the WAL
// flush, so that every transaction writing the outbox would commit one at a time. The
// writer calls Relay.Wake once its transaction has committed (a process-local signal,
// coalesced), and every relay polls as a fallback, which also covers a writer that
// crashed between its commit and its wake-up.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/tracing"
)

// The outbox table is the gateway's migrations services/gateway/migrations/00003_outbox.sql,
// 00025 and 00036 (the trace column), the one schema every service uses. Rows are published in id order and
// deleted once published (rows an earlier version marked published, published_at set,
// wait for the relay's cleanup); a row is pending while published_at is NULL. The relay
// never remembers a high-water mark, so a row whose transaction commits after a row with
// a higher id is still found.

// ErrInvalidMessage is returned by Insert for a message without an ID or a subject.
var ErrInvalidMessage = errors.New("outbox: invalid message")

// Message is one row to publish.
type Message struct {
	// ID is the Nats-Msg-Id (a UUIDv7, fresh for each message): the stream drops a
	// second copy within its duplicate window.
	ID string
	// Subject is the NATS subject to publish on; a JetStream stream must bind it.
	Subject string
	// Data is the message body.
	Data []byte
	// Ephemeral marks a payload that carries secrets (mail jobs): the writer seals it,
	// and like every row it leaves the table once published.
	Ephemeral bool
}

// Insert writes messages in the caller's transaction, so they are published only if the
// transaction commits. Once it has, the caller wakes its relay (Relay.Wake); otherwise a
// relay's poll finds them. The rows carry ctx's trace context (see Queue).
func Insert(ctx context.Context, tx pgx.Tx, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := Queue(ctx, b, msgs...); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("outbox: insert: %w", err)
	}
	return nil
}

// Queue adds the statement that writes messages to b, for a caller that sends its own
// change and its messages as one batch: a batch sent outside an explicit transaction
// runs as one implicit transaction, so the change and its messages commit together in
// one round trip. As with Insert, the caller wakes its relay after the commit. ctx is
// the context of the change: its trace context (traceparent, tracestate) is stored with
// the rows, and the relay publishes it as the messages' headers.
func Queue(ctx context.Context, b *pgx.Batch, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	trace, err := traceOf(ctx)
	if err != nil {
		return err
	}
	if len(msgs) == 1 {
		// The common case (one event per change): a plain row, without the arrays that
		// pgx would encode and PostgreSQL unnest and sort for it.
		m := msgs[0]
		payload, err := payloadOf(0, m)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO outbox (msg_id, subject, payload, ephemeral, trace) VALUES ($1, $2, $3, $4, $5::jsonb)`,
			m.ID, m.Subject, payload, m.Ephemeral, trace)
		return nil
	}
	ids := make([]string, len(msgs))
	subjects := make([]string, len(msgs))
	payloads := make([][]byte, len(msgs))
	ephemeral := make([]bool, len(msgs))
	for i, m := range msgs {
		payload, err := payloadOf(i, m)
		if err != nil {
			return err
		}
		ids[i], subjects[i], payloads[i], ephemeral[i] = m.ID, m.Subject, payload, m.Ephemeral
	}
	// WITH ORDINALITY keeps the caller's order in the identity column, hence on the bus.
	b.Queue(`INSERT INTO outbox (msg_id, subject, payload, ephemeral, trace)
		SELECT m.msg_id, m.subject, m.payload, m.ephemeral, $5::jsonb
		FROM unnest($1::text[], $2::text[], $3::bytea[], $4::boolean[])
			WITH ORDINALITY AS m (msg_id, subject, payload, ephemeral, n)
		ORDER BY m.n`, ids, subjects, payloads, ephemeral, trace)
	return nil
}

// traceOf is the trace column of rows written in ctx: its W3C trace context as a JSON
// object, or nil (NULL) when ctx holds none.
func traceOf(ctx context.Context) (*string, error) {
	c := tracing.Carrier(ctx)
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("outbox: trace context: %w", err)
	}
	s := string(b)
	return &s, nil
}

// payloadOf checks the i-th message of a Queue and returns the payload its row stores.
func payloadOf(i int, m Message) ([]byte, error) {
	if m.ID == "" || m.Subject == "" {
		return nil, fmt.Errorf("%w: message %d needs an ID and a subject", ErrInvalidMessage, i)
	}
	if m.Data == nil {
		return []byte{}, nil // NULL means "erased"; an empty body is not that
	}
	return m.Data, nil
}
