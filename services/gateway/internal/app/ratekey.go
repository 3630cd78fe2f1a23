package app

import "net/netip"

// RateKey is the key a client IP address is counted under: an IPv4 address as
// itself, an IPv6 address by its /64 (one machine is usually given a whole /64, so
// counting single IPv6 addresses would let it use 2^64 of them).
func RateKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
