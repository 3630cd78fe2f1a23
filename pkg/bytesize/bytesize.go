// Package bytesize writes byte counts for people, in binary units: "512 B", "1.5 KiB",
// "10 GiB". The API's error details, the CLI and the e-mails use the same words, so a
// limit reads the same wherever it is met.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// units are the binary prefixes after the first step of 1024.
const units = "KMGTPE"

// Scale splits n into a value below 1024 and the index of its unit: 0 for bytes, 1
// for KiB, 2 for MiB, up to maxExp (at most 6, EiB). A value over 1024 of the largest
// unit stays over it.
func Scale(n int64, maxExp int) (float64, int) {
	const unit = 1024
	maxExp = min(maxExp, len(units))
	if n < unit || maxExp < 1 {
		return float64(n), 0
	}
	div, exp := int64(unit), 1
	for m := n / unit; m >= unit && exp < maxExp; m /= unit {
		div *= unit
		exp++
	}
	return float64(n) / float64(div), exp
}

// Unit is the symbol of Scale's unit index: "B", "KiB", "MiB", …
func Unit(exp int) string {
	if exp <= 0 || exp > len(units) {
		return "B"
	}
	return string(units[exp-1]) + "iB"
}

// IEC writes n with one decimal where it has one: "999 B", "1.5 KiB", "10 GiB".
func IEC(n int64) string {
	v, exp := Scale(n, len(units))
	if exp == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + " " + Unit(exp)
}
