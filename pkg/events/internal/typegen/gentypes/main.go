// Command gentypes writes pkg/events/types.gen.go, the Go constants of the event types
// of proto/events/v1/events.proto (see package typegen). scripts/generate.sh runs it
// after protoc-gen-go: `go run ./events/internal/typegen/gentypes events/types.gen.go`
// from pkg/.
package main

import (
	"fmt"
	"os"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/events/internal/typegen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gentypes OUTPUT.go")
		os.Exit(2)
	}
	src, err := typegen.Render((&eventsv1.Envelope{}).ProtoReflect().Descriptor())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
