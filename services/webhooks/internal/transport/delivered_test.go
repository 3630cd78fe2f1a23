package transport

import "testing"

func TestParseNumDelivered(t *testing.T) {
	cases := []struct {
		reply string
		want  uint64
		ok    bool
	}{
		{"$JS.ACK.SHIPFILE_WEBHOOKS.webhooks-deliver-7.3.1042.17.1764000000000000000.5", 3, true},
		{"$JS.ACK.hub.ACCHASH.SHIPFILE_WEBHOOKS.webhooks-deliver-7.2.1042.17.1764000000000000000.5", 2, true},
		{"$JS.ACK.hub.ACCHASH.SHIPFILE_WEBHOOKS.webhooks-deliver-7.12.1042.17.1764000000000000000.5.rnd", 12, true},
		{"$JS.ACK.S.C.1.1.1.1", 0, false},                 // 8 tokens
		{"$JS.ACK.S.C.x.1.1.1.1", 0, false},               // not a number
		{"$JS.ACK.S.C.0.1.1.1.1", 0, false},               // never delivered: not a real subject
		{"_INBOX.abc.def", 0, false},                      // not an ack subject
		{"", 0, false},                                    // a core NATS message
		{"$JS.ACK.a.b.c.d.e.f.g.h.i.j.k.l.m.n", 0, false}, // too many tokens
	}
	for _, c := range cases {
		got, ok := parseNumDelivered(c.reply)
		if got != c.want || ok != c.ok {
			t.Errorf("parseNumDelivered(%q) = %d, %v; want %d, %v", c.reply, got, ok, c.want, c.ok)
		}
	}
}

func BenchmarkParseNumDelivered(b *testing.B) {
	const reply = "$JS.ACK.SHIPFILE_WEBHOOKS.webhooks-deliver-7.3.1042.17.1764000000000000000.5"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseNumDelivered(reply); !ok {
			b.Fatal("not parsed")
		}
	}
}
