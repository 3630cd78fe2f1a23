package transport

import (
	"testing"
	"time"
)

func TestParseAck(t *testing.T) {
	at := time.Unix(0, 1764000000000000000)
	cases := []struct {
		reply string
		want  ackInfo
		ok    bool
	}{
		{"$JS.ACK.SHIPFILE_EVENTS.webhooks-deliver-7.3.1042.17.1764000000000000000.5", ackInfo{3, 1042, at}, true},
		{"$JS.ACK.hub.ACCHASH.SHIPFILE_EVENTS.webhooks-deliver-7.2.1043.17.1764000000000000000.5", ackInfo{2, 1043, at}, true},
		{"$JS.ACK.hub.ACCHASH.SHIPFILE_EVENTS.webhooks-deliver-7.12.1044.17.1764000000000000000.5.rnd", ackInfo{12, 1044, at}, true},
		{"$JS.ACK.S.C.1.1.1.1", ackInfo{}, false},                 // 8 tokens
		{"$JS.ACK.S.C.x.1.1.1.1", ackInfo{}, false},               // not a number
		{"$JS.ACK.S.C.1.1.1.x.1", ackInfo{}, false},               // no time
		{"$JS.ACK.S.C.0.1.1.1.1", ackInfo{}, false},               // never delivered: not a real subject
		{"_INBOX.abc.def", ackInfo{}, false},                      // not an ack subject
		{"", ackInfo{}, false},                                    // a core NATS message
		{"$JS.ACK.a.b.c.d.e.f.g.h.i.j.k.l.m.n", ackInfo{}, false}, // too many tokens
	}
	for _, c := range cases {
		got, ok := parseAck(c.reply)
		if got.delivered != c.want.delivered || got.streamSeq != c.want.streamSeq || !got.stored.Equal(c.want.stored) || ok != c.ok {
			t.Errorf("parseAck(%q) = %+v, %v; want %+v, %v", c.reply, got, ok, c.want, c.ok)
		}
	}
}

func BenchmarkParseAck(b *testing.B) {
	const reply = "$JS.ACK.SHIPFILE_EVENTS.webhooks-deliver-7.3.1042.17.1764000000000000000.5"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseAck(reply); !ok {
			b.Fatal("not parsed")
		}
	}
}
