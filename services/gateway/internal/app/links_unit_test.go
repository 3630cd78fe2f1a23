package app_test

import (
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
)

// The unit table of the package service (state_unit_test.go) runs the link routes'
// operations too, through app/links on the same fakes.
func init() {
	app.NewLinkOps = func(p *app.Packages, store any) app.LinkOps { return links.New(p, store.(links.Store)) }
}
