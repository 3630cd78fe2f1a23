package commands

import (
	"runtime/debug"
	"strings"
)

// version is the command line's version when set at build time, e.g.
// go build -ldflags "-X github.com/shipfile/shipfile/cli/internal/commands.version=v1.4.0";
// when empty, Version reads it from the binary's build information.
var version string

// Version is what `shipfile --version` prints: the version set at build time, else the
// module's version (v1.4.0 through `go install …@v1.4.0`, "(devel)" in a checkout's
// build) with the commit it was built from, when the go tool recorded one.
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return versionOf(bi)
}

// versionOf makes Version's answer of a binary's build information.
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" || strings.Contains(v, rev[:min(len(rev), 12)]) {
		return v // a pseudo-version names its commit already
	}
	rev = rev[:min(len(rev), 12)]
	if modified == "true" {
		rev += ", modified"
	}
	return v + " (" + rev + ")"
}
