module github.com/shipfile/shipfile/cli

go 1.26.8

require (
	github.com/google/uuid v1.6.0
	github.com/oapi-codegen/runtime v1.8.0
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/shipfile/shipfile/pkg v0.0.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/term v0.47.0
)

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/shipfile/shipfile/pkg => ../pkg

replace github.com/shipfile/shipfile/proto => ../proto
