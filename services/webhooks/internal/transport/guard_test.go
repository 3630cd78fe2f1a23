package transport

import (
	"errors"
	"net/netip"
	"testing"
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
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"::ffff:100.64.0.1", "carrier-grade NAT"},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"255.255.255.255", "broadcast"},
		{"64:ff9b::7f00:1", "loopback (embedded in IPv6)"},
		{"64:ff9b::a9fe:a9fe", "link-local (embedded in IPv6)"},
		{"64:ff9b::808:808", ""},
		{"::7f00:1", "loopback (embedded in IPv6)"},
		{"2002:c0a8:0101::1", "private (embedded in 6to4)"},
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
			if got := Classify(netip.MustParseAddr(c.ip)); got != c.want {
				t.Errorf("Classify(%s) = %q, want %q", c.ip, got, c.want)
			}
		})
	}
	if Classify(netip.Addr{}) == "" {
		t.Error("the zero address must be refused")
	}
}

func TestGuardControl(t *testing.T) {
	for addr, refused := range map[string]bool{
		"127.0.0.1:80":           true,
		"[::1]:443":              true,
		"[::ffff:10.0.0.1]:8080": true,
		"[fe80::1%lo]:80":        true,
		"10.0.0.1":               true, // unparsable without a port: refused too
		"8.8.8.8:443":            false,
		"[2606:4700::1111]:443":  false,
	} {
		err := guardControl("tcp", addr, nil)
		if (err != nil) != refused {
			t.Errorf("%s: err = %v, want refused %v", addr, err, refused)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v does not wrap ErrRefused", addr, err)
		}
	}
}
