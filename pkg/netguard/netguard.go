// Package netguard is the one address guard of webhook targets: the gateway asks it
// when a subscription's URL is saved (CheckHost: a literal address or a localhost
// name), the dispatcher when it dials (Control: every address actually connected to,
// after name resolution, so DNS rebinding is caught too). Both refuse the same
// addresses: loopback, private, link-local, carrier-grade NAT, IETF protocol
// assignments, benchmarking, reserved (240.0.0.0/4), site-local IPv6, multicast,
// unspecified and broadcast, also when written as IPv4-mapped, IPv4-compatible, NAT64
// or 6to4 IPv6. SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true turns the refusals off.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// ErrRefused is wrapped by every refusal of an address.
var ErrRefused = errors.New("refused")

// ErrNotCanonical is wrapped when a host is neither a domain name nor an IP address in
// standard notation (127.1, 2130706433, 0x7f.1): resolvers read such names as addresses,
// so they are refused whatever AllowPrivate says.
var ErrNotCanonical = errors.New("not a domain name or an IP address in standard notation")

// Ranges Classify refuses beyond those the netip predicates name.
var (
	thisNetwork  = netip.MustParsePrefix("0.0.0.0/8")     // "this network": 0.x reaches the local host on Linux
	cgnat        = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT (shared address space, RFC 6598)
	ietfProtocol = netip.MustParsePrefix("192.0.0.0/24")  // IETF protocol assignments (RFC 6890)
	benchmarking = netip.MustParsePrefix("198.18.0.0/15") // network benchmarking (RFC 2544)
	reserved     = netip.MustParsePrefix("240.0.0.0/4")   // reserved for future use ("class E")
	broadcast    = netip.MustParsePrefix("255.255.255.255/32")
	siteLocal    = netip.MustParsePrefix("fec0::/10")      // deprecated IPv6 site-local, still routed inside some sites
	nat64        = netip.MustParsePrefix("64:ff9b::/96")   // NAT64: the last 32 bits are an IPv4 address
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48") // NAT64 for local use
	sixToFour    = netip.MustParsePrefix("2002::/16")      // 6to4: bits 16–47 are an IPv4 address
	v4Compat     = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible IPv6
)

// Classify returns why a webhook must not connect to ip ("loopback", "private", …), or
// "" when it may. IPv4 addresses embedded in IPv6 (IPv4-mapped, IPv4-compatible, NAT64,
// 6to4) are judged as the IPv4 address they carry.
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	ip = ip.Unmap().WithZone("")
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
	case ietfProtocol.Contains(ip):
		return "IETF protocol assignment"
	case benchmarking.Contains(ip):
		return "benchmarking"
	case reserved.Contains(ip):
		return "reserved"
	case siteLocal.Contains(ip):
		return "site-local"
	}
	return ""
}

// HostError is CheckHost's refusal of a host: "host 100.64.0.1 is a carrier-grade NAT
// address". It wraps ErrRefused or ErrNotCanonical.
type HostError struct {
	Host string
	What string // "a carrier-grade NAT address", "a loopback name", …
	Err  error  // ErrRefused or ErrNotCanonical
}

func (e *HostError) Error() string { return "host " + e.Host + " is " + e.What }

// Unwrap returns ErrRefused or ErrNotCanonical.
func (e *HostError) Unwrap() error { return e.Err }

// Guard decides which webhook targets are allowed. The zero Guard refuses every
// address Classify objects to.
type Guard struct {
	// AllowPrivate lets webhooks reach every address (SHIPFILE_WEBHOOK_ALLOW_PRIVATE;
	// for development and tests on one machine).
	AllowPrivate bool
}

// CheckHost judges the host of a URL being saved (url.URL.Hostname(): no brackets, a
// zone allowed). A name that is not an address in standard notation is refused
// (ErrNotCanonical) whatever AllowPrivate says; unless AllowPrivate, so are localhost
// names and literal addresses Classify objects to (ErrRefused). Other names are not
// resolved here: Control checks what they resolve to at every connection.
func (g Guard) CheckHost(host string) error {
	if host == "" {
		return &HostError{Host: `""`, What: "empty", Err: ErrRefused}
	}
	addr, err := netip.ParseAddr(host)
	isIP := err == nil
	if !isIP && endsInNumber(host) {
		return &HostError{Host: host, What: ErrNotCanonical.Error(), Err: ErrNotCanonical}
	}
	if g.AllowPrivate {
		return nil
	}
	if !isIP {
		if isLocalhost(host) {
			return &HostError{Host: host, What: "a loopback name", Err: ErrRefused}
		}
		return nil
	}
	if reason := Classify(addr); reason != "" {
		return &HostError{Host: host, What: article(reason) + " address", Err: ErrRefused}
	}
	return nil
}

// Control is a net.Dialer Control function: unless AllowPrivate, it refuses every
// address Classify objects to. It runs for each address actually dialled, after name
// resolution, so a name that resolves to a public address when the subscription is
// saved and to a private one later (DNS rebinding) is refused too.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
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
		return fmt.Errorf("webhook target %s is %s address: connection %w (SHIPFILE_WEBHOOK_ALLOW_PRIVATE is false)",
			ap.Addr(), article(reason), ErrRefused)
	}
	return nil
}

// article prefixes a reason with "a" or "an".
func article(reason string) string {
	if strings.ContainsRune("aeiouAEIOU", rune(reason[0])) {
		return "an " + reason
	}
	return "a " + reason
}

// endsInNumber reports whether host's last label is a number (decimal or 0x hex),
// which makes it an IPv4 address to URL parsers and resolvers, never a domain name.
func endsInNumber(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := strings.ToLower(labels[len(labels)-1])
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		return !strings.ContainsFunc(rest, func(r rune) bool { return !strings.ContainsRune("0123456789abcdef", r) })
	}
	return last != "" && !strings.ContainsFunc(last, func(r rune) bool { return r < '0' || r > '9' })
}

// isLocalhost reports whether host is localhost or a name under .localhost, which
// resolve to loopback addresses (RFC 6761).
func isLocalhost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}
