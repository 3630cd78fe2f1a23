package e2e

import (
	"testing"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// eicar is the EICAR anti-virus test file (servicetest.EICAR).
var eicar = servicetest.EICAR

// clamdLimits are the size limits of the tests' clamd: above every file of the tests
// but those that are meant to exceed them.
const clamdLimits = "StreamMaxLength 200M\nMaxScanSize 200M\nMaxFileSize 200M\n"

// startClamd starts a private clamd with limits (clamd.conf lines) and the shipped
// Alert* options (servicetest.StartClamd).
func startClamd(t testing.TB, limits string) *servicetest.Clamd {
	t.Helper()
	return servicetest.StartClamd(t, limits)
}
