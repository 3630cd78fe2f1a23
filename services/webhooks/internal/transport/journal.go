package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/groupcommit"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// The attempt journal (app.AttemptJournal) is a subject of the jobs stream: an instance
// publishes the records of the attempts that delivered a delivery at its first try,
// those of its concurrent attempts in one message, and acknowledges their jobs once
// JetStream has stored it; the journal consumer, shared by every instance, writes what
// gathered in the journal into the database in one commit. The commits a delivery
// costs then depend on the journal, not on how many instances share the
// subscriptions' max_in_flight (each instance's own group commits hold its share of
// the slots only). A record reaches the delivery log within about JournalLinger plus
// a commit; an instance killed after the publish leaves its records to the others.

// JournalLinger is how long the journal consumer lets records gather after the first
// one before it writes them: the longest a delivered attempt waits to show in the
// delivery log, and what keeps the journal's commits few whatever the rate.
const JournalLinger = 50 * time.Millisecond

// journalMessageBytes bounds one journal message (NATS refuses payloads over its
// max_payload, 1 MiB by default); journalMaxBody is the largest body a journaled
// record carries (a larger one is committed on the delivery path).
const (
	journalMessageBytes = 256 << 10
	journalMaxBody      = 64 << 10
)

// Journal publishes attempt records to the journal subject.
type Journal struct {
	js      jetstream.JetStream
	subject string
	c       *groupcommit.Committer[app.AttemptRecord, struct{}]
}

var _ app.AttemptJournal = (*Journal)(nil)

// NewJournal returns the journal of the dispatcher named by opts; Close stops it.
func NewJournal(js jetstream.JetStream, opts Options) *Journal {
	opts.defaults()
	j := &Journal{js: js, subject: opts.JournalSubject()}
	// Concurrent attempts share a message; publishes take turns while they are quick.
	j.c = groupcommit.New(groupcommit.Options{Runners: 4, Max: 256, Spill: 20 * time.Millisecond, Timeout: 10 * time.Second}, j.publish)
	return j
}

// Append publishes rec and returns once JetStream has stored it; a record whose body is
// too large for the journal gets app.ErrNotJournaled (it is committed instead).
func (j *Journal) Append(ctx context.Context, rec app.AttemptRecord) error {
	if len(rec.Body) > journalMaxBody {
		return app.ErrNotJournaled
	}
	_, err := j.c.Do(ctx, rec)
	return err
}

// Close stops the publisher once the publishes under way are done.
func (j *Journal) Close() { j.c.Close() }

// publish writes recs in as few messages as journalMessageBytes allows.
func (j *Journal) publish(ctx context.Context, recs []app.AttemptRecord) ([]struct{}, error) {
	err := journalMessages(recs, func(msg []byte) error {
		_, err := j.js.Publish(ctx, j.subject, msg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("publish to the attempt journal: %w", err)
	}
	return make([]struct{}, len(recs)), nil
}

// journalMessages encodes recs as JSON lists of at most journalMessageBytes each (a
// record alone may be larger by its own size: Append takes none with a body over
// journalMaxBody) and hands each to send; the slice is reused after send returns.
func journalMessages(recs []app.AttemptRecord, send func([]byte) error) error {
	var buf bytes.Buffer
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		buf.WriteByte(']')
		err := send(buf.Bytes())
		buf.Reset()
		return err
	}
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if buf.Len() > 0 && buf.Len()+len(b)+2 > journalMessageBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		if buf.Len() == 0 {
			buf.WriteByte('[')
		} else {
			buf.WriteByte(',')
		}
		buf.Write(b)
	}
	return flush()
}

// decodeJournal reads the records of one journal message.
func decodeJournal(data []byte) ([]app.AttemptRecord, error) {
	var recs []app.AttemptRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("attempt journal message: %w", err)
	}
	for _, r := range recs {
		if _, err := uuid.Parse(r.DeliveryID); err != nil {
			return nil, fmt.Errorf("attempt journal record with delivery id %q: %w", r.DeliveryID, err)
		}
		if r.Status != app.StatusSucceeded || r.SubscriptionID <= 0 {
			return nil, fmt.Errorf("attempt journal record of delivery %s: status %q, hook %d", r.DeliveryID, r.Status, r.SubscriptionID)
		}
	}
	return recs, nil
}

// JournalStore writes the journal's records into the database.
type JournalStore interface {
	RecordJournal(ctx context.Context, recs []app.AttemptRecord) error
}

// handleJournal writes the records of a batch of journal messages in one commit.
func (d *Dispatcher) handleJournal(ctx context.Context, msgs []jetstream.Msg) []consumer.Decision {
	out := make([]consumer.Decision, len(msgs))
	var recs []app.AttemptRecord
	var taken []int
	for i, m := range msgs {
		rs, err := decodeJournal(m.Data())
		if err != nil {
			out[i] = consumer.Poison(err.Error())
			continue
		}
		recs = append(recs, rs...)
		taken = append(taken, i)
	}
	var err error
	if len(recs) > 0 {
		err = d.p.JournalStore.RecordJournal(ctx, recs)
	}
	for _, i := range taken {
		if err != nil {
			out[i] = consumer.Failed(err)
		} else {
			out[i] = consumer.Acked()
		}
	}
	return out
}

// drainJournal writes what is left in the journal before a stopping instance exits,
// until the journal is empty or ctx is done: a dispatcher that stops last leaves no
// delivered attempt out of the log until the next one starts.
func (d *Dispatcher) drainJournal(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		b, err := cons.FetchNoWait(journalFetch)
		if err != nil {
			return
		}
		var msgs []jetstream.Msg
		for m := range b.Messages() {
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 {
			return
		}
		decisions := d.journal.Process(ctx, msgs...)
		for _, dec := range decisions {
			if dec.Action != consumer.Ack && dec.Action != consumer.Term {
				return // the database fails: the next instance writes them
			}
		}
	}
}

// journalFetch is the most journal messages one write takes.
const journalFetch = 256
