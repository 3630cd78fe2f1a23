package transport

import (
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/consumer"
)

// numDelivered is how many times JetStream has delivered msg, read from the one token
// of its reply subject that says it, without parsing the whole metadata (msg.Metadata
// splits the subject and parses every field: a few per cent of the dispatcher's CPU
// when it ran for every job). A subject of another shape falls back to
// consumer.NumDelivered.
func numDelivered(msg jetstream.Msg) uint64 {
	if n, ok := parseNumDelivered(msg.Reply()); ok {
		return n
	}
	return consumer.NumDelivered(msg)
}

// parseNumDelivered reads the delivery count of a JetStream ack subject:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>                  (9 tokens)
//	$JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>] (11 or 12)
//
// the same shapes nats.go's metadata parser accepts.
func parseNumDelivered(reply string) (uint64, bool) {
	const prefix = "$JS.ACK."
	if len(reply) <= len(prefix) || reply[:len(prefix)] != prefix {
		return 0, false
	}
	// The token boundaries (at most 12 tokens) without allocating.
	var starts [13]int // starts[0] = 0: the first token
	n := 1
	for i := 0; i < len(reply); i++ {
		if reply[i] == '.' {
			if n == len(starts)-1 {
				return 0, false // more tokens than any known shape
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
		return 0, false
	}
	v, err := strconv.ParseUint(reply[starts[idx]:starts[idx+1]-1], 10, 64)
	if err != nil || v == 0 {
		return 0, false
	}
	return v, true
}
