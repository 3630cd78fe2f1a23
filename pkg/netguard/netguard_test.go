package netguard_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/shipfile/shipfile/pkg/netguard"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		ip   string
		want string // "" allowed
	}{
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"172.32.0.1", ""},
		{"172.15.255.255", ""},
		{"192.168.1.1", "private"},
		{"::ffff:192.168.1.1", "private"},
		{"::ffff:10.1.2.3", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "link-local"},
		{"::ffff:169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"::ffff:224.0.0.1", "multicast"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"::ffff:100.64.0.1", "carrier-grade NAT"},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"192.0.0.1", "IETF protocol assignment"},
		{"192.0.0.255", "IETF protocol assignment"},
		{"::ffff:192.0.0.8", "IETF protocol assignment"},
		{"192.0.1.0", ""},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"::ffff:198.18.0.1", "benchmarking"},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"240.0.0.1", "reserved"},
		{"254.255.255.255", "reserved"},
		{"::ffff:240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"fec0::1", "site-local"},
		{"feff:ffff::1", "site-local"},
		{"64:ff9b::7f00:1", "loopback (embedded in IPv6)"},
		{"64:ff9b::a9fe:a9fe", "link-local (embedded in IPv6)"},
		{"64:ff9b::6440:1", "carrier-grade NAT (embedded in IPv6)"},
		{"64:ff9b::808:808", ""},
		{"::7f00:1", "loopback (embedded in IPv6)"},
		{"::c612:1", "benchmarking (embedded in IPv6)"},
		{"2002:c0a8:0101::1", "private (embedded in 6to4)"},
		{"2002:f000:0001::1", "reserved (embedded in 6to4)"},
		{"2002:0808:0808::1", ""},
		{"64:ff9b:1::1", "private (local-use NAT64)"},
		{"8.8.8.8", ""},
		{"93.184.216.34", ""},
		{"::ffff:8.8.8.8", ""},
		{"2606:4700:4700::1111", ""},
		{"2001:db8::1", ""},
	}
	for _, c := range cases {
		t.Run(c.ip, func(t *testing.T) {
			if got := netguard.Classify(netip.MustParseAddr(c.ip)); got != c.want {
				t.Errorf("Classify(%s) = %q, want %q", c.ip, got, c.want)
			}
		})
	}
	if netguard.Classify(netip.Addr{}) == "" {
		t.Error("the zero address must be refused")
	}
}

func TestCheckHost(t *testing.T) {
	cases := []struct {
		host string
		// what the guard says, refusing (AllowPrivate false) and allowing (true):
		// nil, ErrRefused or ErrNotCanonical
		refusing, allowing error
	}{
		{"hooks.example.com", nil, nil},
		{"8.8.8.8", nil, nil},
		{"2001:db8::1", nil, nil},
		{"127.0.0.1", netguard.ErrRefused, nil},
		{"100.64.0.1", netguard.ErrRefused, nil},
		{"192.0.0.8", netguard.ErrRefused, nil},
		{"198.18.0.1", netguard.ErrRefused, nil},
		{"240.0.0.1", netguard.ErrRefused, nil},
		{"fec0::1", netguard.ErrRefused, nil},
		{"ff02::1", netguard.ErrRefused, nil},
		{"::", netguard.ErrRefused, nil},
		{"::ffff:100.64.0.1", netguard.ErrRefused, nil},
		{"fe80::1%eth0", netguard.ErrRefused, nil},
		{"localhost", netguard.ErrRefused, nil},
		{"LocalHost.", netguard.ErrRefused, nil},
		{"api.localhost", netguard.ErrRefused, nil},
		{"localhost.example.com", nil, nil},
		{"127.1", netguard.ErrNotCanonical, netguard.ErrNotCanonical},
		{"2130706433", netguard.ErrNotCanonical, netguard.ErrNotCanonical},
		{"0x7f000001", netguard.ErrNotCanonical, netguard.ErrNotCanonical},
		{"hooks.0x10", netguard.ErrNotCanonical, netguard.ErrNotCanonical},
		{"", netguard.ErrRefused, netguard.ErrRefused},
	}
	for _, c := range cases {
		t.Run(c.host, func(t *testing.T) {
			for _, g := range []struct {
				guard netguard.Guard
				want  error
			}{{netguard.Guard{}, c.refusing}, {netguard.Guard{AllowPrivate: true}, c.allowing}} {
				err := g.guard.CheckHost(c.host)
				if (err == nil) != (g.want == nil) || (g.want != nil && !errors.Is(err, g.want)) {
					t.Errorf("%+v.CheckHost(%q) = %v, want %v", g.guard, c.host, err, g.want)
				}
			}
		})
	}
}

func TestControl(t *testing.T) {
	refusing := netguard.Guard{}
	for addr, refused := range map[string]bool{
		"127.0.0.1:80":           true,
		"[::1]:443":              true,
		"[::ffff:10.0.0.1]:8080": true,
		"[fe80::1%lo]:80":        true,
		"100.64.0.1:443":         true,
		"198.18.0.1:443":         true,
		"240.0.0.1:443":          true,
		"[fec0::1]:443":          true,
		"10.0.0.1":               true, // unparsable without a port: refused too
		"8.8.8.8:443":            false,
		"[2606:4700::1111]:443":  false,
	} {
		err := refusing.Control("tcp", addr, nil)
		if (err != nil) != refused {
			t.Errorf("%s: err = %v, want refused %v", addr, err, refused)
		}
		if err != nil && !errors.Is(err, netguard.ErrRefused) {
			t.Errorf("%s: %v does not wrap ErrRefused", addr, err)
		}
		if err := (netguard.Guard{AllowPrivate: true}).Control("tcp", addr, nil); err != nil {
			t.Errorf("AllowPrivate: %s refused: %v", addr, err)
		}
	}
}

func TestHostErrorSaysWhy(t *testing.T) {
	err := netguard.Guard{}.CheckHost("100.64.0.1")
	var he *netguard.HostError
	if !errors.As(err, &he) || err.Error() != "host 100.64.0.1 is a carrier-grade NAT address" {
		t.Fatalf("CheckHost(100.64.0.1) = %v", err)
	}
}
