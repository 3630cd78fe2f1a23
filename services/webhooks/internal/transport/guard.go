package transport

import "github.com/shipfile/shipfile/pkg/netguard"

// ErrRefused is wrapped by every dial the address guard (pkg/netguard) refuses.
var ErrRefused = netguard.ErrRefused
