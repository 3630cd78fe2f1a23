package packages_test

import (
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// The unit table of the package service (state_unit_test.go) runs the link routes'
// operations too, through app/links on the same fakes.
func init() {
	packages.NewLinkOps = func(p *packages.Packages, store any) packages.LinkOps {
		return links.New(p, store.(links.Store), store.(links.Files))
	}
}
