package transport

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
)

// ackInfo is what a delivery consumer's handler needs of a message's metadata: how many
// times JetStream has delivered it, its stream sequence and when it was stored.
type ackInfo struct {
	delivered uint64
	streamSeq uint64
	stored    time.Time
}

// ackInfoOf reads msg's ackInfo from the tokens of its reply subject that say it,
// without parsing the whole metadata (msg.Metadata splits the subject and parses every
// field: a few per cent of the dispatcher's CPU when it ran for every job). A subject
// of another shape falls back to msg.Metadata.
func ackInfoOf(msg jetstream.Msg) ackInfo {
	if a, ok := parseAck(msg.Reply()); ok {
		return a
	}
	md, err := msg.Metadata()
	if err != nil {
		return ackInfo{delivered: consumer.NumDelivered(msg)}
	}
	return ackInfo{delivered: md.NumDelivered, streamSeq: md.Sequence.Stream, stored: md.Timestamp}
}

// parseAck reads the delivery count, stream sequence and time of a JetStream ack
// subject:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>                  (9 tokens)
//	$JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>] (11 or 12)
//
// the same shapes nats.go's metadata parser accepts.
func parseAck(reply string) (ackInfo, bool) {
	const prefix = "$JS.ACK."
	if len(reply) <= len(prefix) || reply[:len(prefix)] != prefix {
		return ackInfo{}, false
	}
	// The token boundaries (at most 12 tokens) without allocating.
	var starts [13]int // starts[0] = 0: the first token
	n := 1
	for i := 0; i < len(reply); i++ {
		if reply[i] == '.' {
			if n == len(starts)-1 {
				return ackInfo{}, false // more tokens than any known shape
			}
			starts[n] = i + 1
			n++
		}
	}
	starts[n] = len(reply) + 1
	var idx int
	switch {
	case n == 9:
		idx = 4
	case n == 11 || n == 12:
		idx = 6
	default:
		return ackInfo{}, false
	}
	token := func(i int) (uint64, bool) {
		v, err := strconv.ParseUint(reply[starts[i]:starts[i+1]-1], 10, 64)
		return v, err == nil
	}
	delivered, ok1 := token(idx)
	seq, ok2 := token(idx + 1)
	ts, ok3 := token(idx + 3)
	if !ok1 || !ok2 || !ok3 || delivered == 0 || ts > 1<<63-1 {
		return ackInfo{}, false
	}
	return ackInfo{delivered: delivered, streamSeq: seq, stored: time.Unix(0, int64(ts))}, true
}
