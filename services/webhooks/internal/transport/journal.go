package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"

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
// a commit; a stopping instance writes what is left (Runtime.Drain), and one killed
// after the publish leaves its records to the others.

// JournalLinger is how long the journal consumer lets records gather, when others wait
// beside the first, before it writes them (a lone record is written at once): the
// longest a delivered attempt waits to show in the delivery log, and what keeps the
// journal's commits few whatever the rate.
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

// journalMessages encodes recs into messages of at most journalMessageBytes each (a
// record alone may be larger by its own size: Append takes none with a body over
// journalMaxBody) and hands each to send; the slice is reused after send returns.
//
// A message is a protobuf message (written with protowire: the journal is internal to
// the dispatcher and has no .proto of its own) whose field 1 repeats the records:
//
//	1 delivery_id string   5 body bytes                 9 status_code int64
//	2 hook_id int64        6 created_at_unix_ms int64  10 duration_ns int64
//	3 event_id string      7 package_id string         11 excerpt string
//	4 event string         8 package_seq uint64        12 has_response bool
//
// Every record is a delivered attempt (status succeeded, no error).
func journalMessages(recs []app.AttemptRecord, send func([]byte) error) error {
	var msg, rec []byte
	for _, r := range recs {
		rec = appendJournalRecord(rec[:0], r)
		size := protowire.SizeTag(1) + protowire.SizeBytes(len(rec))
		if len(msg) > 0 && len(msg)+size > journalMessageBytes {
			if err := send(msg); err != nil {
				return err
			}
			msg = msg[:0]
		}
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendBytes(msg, rec)
	}
	if len(msg) == 0 {
		return nil
	}
	return send(msg)
}

func appendJournalRecord(b []byte, r app.AttemptRecord) []byte {
	str := func(n protowire.Number, v string) {
		if v != "" {
			b = protowire.AppendTag(b, n, protowire.BytesType)
			b = protowire.AppendString(b, v)
		}
	}
	num := func(n protowire.Number, v uint64) {
		if v != 0 {
			b = protowire.AppendTag(b, n, protowire.VarintType)
			b = protowire.AppendVarint(b, v)
		}
	}
	str(1, r.DeliveryID)
	num(2, uint64(r.SubscriptionID))
	str(3, r.EventID)
	str(4, r.Event)
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendBytes(b, r.Body)
	if !r.CreatedAt.IsZero() {
		num(6, uint64(r.CreatedAt.UnixMilli()))
	}
	str(7, r.PackageID)
	num(8, r.PackageSeq)
	num(9, uint64(int64(r.StatusCode)))
	num(10, uint64(r.Duration))
	str(11, r.Excerpt)
	if r.HasResponse {
		num(12, 1)
	}
	return b
}

// decodeJournal reads the records of one journal message.
func decodeJournal(data []byte) ([]app.AttemptRecord, error) {
	var recs []app.AttemptRecord
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, errors.New("attempt journal message: not a list of records")
		}
		data = data[n:]
		v, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return nil, errors.New("attempt journal message: a record cut short")
		}
		data = data[n:]
		r, err := decodeJournalRecord(v)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil, errors.New("attempt journal message: no record")
	}
	return recs, nil
}

func decodeJournalRecord(b []byte) (app.AttemptRecord, error) {
	r := app.AttemptRecord{Status: app.StatusSucceeded, Succeeded: true}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, errors.New("attempt journal record: a bad tag")
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return r, fmt.Errorf("attempt journal record: field %d cut short", num)
		}
		b = b[n:]
		switch num {
		case 1:
			r.DeliveryID = string(raw)
		case 2:
			r.SubscriptionID = int64(v)
		case 3:
			r.EventID = string(raw)
		case 4:
			r.Event = string(raw)
		case 5:
			r.Body = append([]byte{}, raw...)
		case 6:
			r.CreatedAt = time.UnixMilli(int64(v))
		case 7:
			r.PackageID = string(raw)
		case 8:
			r.PackageSeq = v
		case 9:
			r.StatusCode = int(int64(v))
		case 10:
			r.Duration = time.Duration(v)
		case 11:
			r.Excerpt = string(raw)
		case 12:
			r.HasResponse = v != 0
		}
	}
	if _, err := uuid.Parse(r.DeliveryID); err != nil {
		return r, fmt.Errorf("attempt journal record with delivery id %q: %w", r.DeliveryID, err)
	}
	if r.SubscriptionID <= 0 || r.Body == nil {
		return r, fmt.Errorf("attempt journal record of delivery %s: hook %d, body given %t", r.DeliveryID, r.SubscriptionID, r.Body != nil)
	}
	return r, nil
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

// journalFetch is the most journal messages one write takes; journalDrainTimeout bounds
// the writes of a stopping instance.
const (
	journalFetch        = 256
	journalDrainTimeout = 5 * time.Second
)
