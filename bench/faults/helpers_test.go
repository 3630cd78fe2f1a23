//go:build faults

package faults

import (
	"fmt"
	"strconv"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

func itoa[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// describe shows an answer or the error that took its place.
func describe(a rig.Answer, err error) string {
	if err != nil {
		return "no answer (" + err.Error() + ")"
	}
	return fmt.Sprintf("%d %s", a.Status, a.Body)
}

func triple(a, b, c int64) string { return fmt.Sprintf("%d / %d / %d", a, b, c) }

func exactly(r rig.ExactlyOnce) string {
	return fmt.Sprintf("%d / %d / %d / %d / %d", r.Committed, r.InStream, r.Lost, r.Duplicated, r.Foreign)
}
