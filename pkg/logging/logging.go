// Package logging builds the JSON slog logger every shipfile service uses.
package logging

import (
	"log/slog"
	"os"
	"strings"
)

// New returns a JSON logger on standard error tagged with the service name. The level
// comes from SHIPFILE_LOG_LEVEL (debug, info, warn, error; default info).
func New(service string) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.TrimSpace(os.Getenv("SHIPFILE_LOG_LEVEL")))); err != nil {
		level = slog.LevelInfo
	}
	h := slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	return slog.New(h).With("service", service)
}
