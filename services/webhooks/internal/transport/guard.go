package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrRefused is wrapped by every dial the SSRF guard refuses.
var ErrRefused = errors.New("refused")

// Ranges Classify refuses beyond those the netip predicates name.
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")     // "this network": 0.x reaches the local host on Linux
	cgnat       = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT (shared address space)
	broadcast   = netip.MustParsePrefix("255.255.255.255/32")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")   // NAT64: the last 32 bits are an IPv4 address
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48") // NAT64 for local use
	sixToFour   = netip.MustParsePrefix("2002::/16")      // 6to4: bits 16–47 are an IPv4 address
	v4Compat    = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible IPv6
)

// Classify returns why a webhook must not connect to ip ("loopback", "private", …), or
// "" when it may. IPv4 addresses embedded in IPv6 (IPv4-mapped, IPv4-compatible, NAT64,
// 6to4) are judged as the IPv4 address they carry.
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip) || (v4Compat.Contains(ip) && !ip.IsLoopback() && !ip.IsUnspecified()):
			if r := Classify(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
				return r + " (embedded in IPv6)"
			}
		case sixToFour.Contains(ip):
			if r := Classify(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
				return r + " (embedded in 6to4)"
			}
		case nat64Local.Contains(ip):
			return "private (local-use NAT64)"
		}
	}
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case cgnat.Contains(ip):
		return "carrier-grade NAT"
	case thisNetwork.Contains(ip):
		return "this-network"
	case broadcast.Contains(ip):
		return "broadcast"
	}
	return ""
}

// guardControl is a net.Dialer Control function that refuses every address Classify
// objects to. It runs for each address actually dialled, after name resolution, so a
// name that resolves to a public address when the subscription is saved and to a private
// one later (DNS rebinding) is refused too.
func guardControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, splitErr := net.SplitHostPort(address)
		if splitErr != nil {
			return fmt.Errorf("webhook target %q: %w: unparsable address", address, ErrRefused)
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("webhook target %q: %w: unparsable address", address, ErrRefused)
		}
		ap = netip.AddrPortFrom(a, 0)
	}
	if reason := Classify(ap.Addr()); reason != "" {
		return fmt.Errorf("webhook target %s is a %s address: connection %w (SHIPFILE_WEBHOOK_ALLOW_PRIVATE is false)",
			ap.Addr(), reason, ErrRefused)
	}
	return nil
}
