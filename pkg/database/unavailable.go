package database

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err says that PostgreSQL cannot be reached right now,
// rather than that the statement was wrong: a connection attempt that failed, a
// connection lost mid-statement, or a server that is shutting down, starting up or out
// of connections (SQLSTATE class 08, 57P01-57P03, 53300). Callers answer such errors
// with 503 and a retry, not 500.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case strings.HasPrefix(pg.Code, "08"), pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03", pg.Code == "53300":
			return true
		}
		return false
	}
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}
