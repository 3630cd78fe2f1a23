package i18n

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/text/number"

	"github.com/shipfile/shipfile/pkg/bytesize"
)

// sizeUnits are the byte units of each language: French writes octets.
var sizeUnits = map[string][6]string{
	"fr": {"o", "Kio", "Mio", "Gio", "Tio", "Pio"},
}

var defaultUnits = [6]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}

// Size formats a number of bytes in binary units with one decimal, with the
// language's decimal separator: "1.5 MiB", "1,5 MiB", "1,5 Mio".
func (l *Localizer) Size(n int64) string {
	units := l.sizeUnits()
	v, exp := bytesize.Scale(n, len(units)-1)
	if exp == 0 {
		return l.p.Sprintf("%v %s", number.Decimal(n), units[0])
	}
	return l.p.Sprintf("%v %s", number.Decimal(v, number.Scale(1)), units[exp])
}

// SizeCompact is Size without a decimal that rounds to zero, the way quotas and
// limits are written: "10 MiB", "1.5 MiB", "10 Mio", "1,5 Mio".
func (l *Localizer) SizeCompact(n int64) string {
	units := l.sizeUnits()
	v, exp := bytesize.Scale(n, len(units)-1)
	if exp == 0 {
		return l.Size(n)
	}
	v = math.Round(v*10) / 10
	if v != math.Trunc(v) {
		return l.Size(n)
	}
	return l.p.Sprintf("%v %s", number.Decimal(int64(v)), units[exp])
}

// sizeUnits are the language's byte units, bytes first.
func (l *Localizer) sizeUnits() [6]string {
	if units, ok := sizeUnits[l.Lang]; ok {
		return units
	}
	return defaultUnits
}

// Number formats an integer with the language's grouping: "12,345", "12.345".
func (l *Localizer) Number(n int64) string {
	return l.p.Sprint(number.Decimal(n))
}

// dateLayouts are the short date and time layouts (in UTC) of each language.
var dateLayouts = map[string]string{
	"en": "2006-01-02 15:04 UTC",
	"de": "02.01.2006, 15:04 UTC",
	"fr": "02/01/2006 15:04 UTC",
	"es": "02/01/2006 15:04 UTC",
	"pt": "02/01/2006 15:04 UTC",
}

// Date formats t, in UTC, the short way the language writes a date and time.
func (l *Localizer) Date(t time.Time) string {
	layout, ok := dateLayouts[l.Lang]
	if !ok {
		layout = dateLayouts[Default]
	}
	return t.UTC().Format(layout)
}

// DatePtr is Date for an optional time: "—" for nil.
func (l *Localizer) DatePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return l.Date(*t)
}

// longNames are the weekday (Sunday first) and month names of each language other
// than English, which time.Format writes itself.
var longNames = map[string]struct {
	days   [7]string
	months [12]string
	layout string // {weekday}, {day}, {month}, {year}, {time}
}{
	"de": {
		[7]string{"Sonntag", "Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag"},
		[12]string{"Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober", "November", "Dezember"},
		"%[1]s, %[2]d. %[3]s %[4]d um %[5]s UTC",
	},
	"fr": {
		[7]string{"dimanche", "lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi"},
		[12]string{"janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre", "décembre"},
		"%[1]s %[2]d %[3]s %[4]d à %[5]s UTC",
	},
	"es": {
		[7]string{"domingo", "lunes", "martes", "miércoles", "jueves", "viernes", "sábado"},
		[12]string{"enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre", "noviembre", "diciembre"},
		"%[1]s, %[2]d de %[3]s de %[4]d a las %[5]s UTC",
	},
	"pt": {
		[7]string{"domingo", "segunda-feira", "terça-feira", "quarta-feira", "quinta-feira", "sexta-feira", "sábado"},
		[12]string{"janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro", "novembro", "dezembro"},
		"%[1]s, %[2]d de %[3]s de %[4]d às %[5]s UTC",
	},
}

// DateLong formats t, in UTC, with the weekday and month in words, as an e-mail says
// until when a link works: "Saturday, 28 November 2026 at 16:32 UTC",
// "Samstag, 28. November 2026 um 16:32 UTC".
func (l *Localizer) DateLong(t time.Time) string {
	t = t.UTC()
	n, ok := longNames[l.Lang]
	if !ok {
		return t.Format("Monday, 2 January 2006 at 15:04 MST")
	}
	return fmt.Sprintf(n.layout, n.days[t.Weekday()], t.Day(), n.months[t.Month()-1], t.Year(), t.Format("15:04"))
}

// Relative says how far t is from now, in words: "in 3 days", "vor 2 Stunden".
func (l *Localizer) Relative(t time.Time) string {
	return l.relative(time.Until(t))
}

func (l *Localizer) relative(d time.Duration) string {
	past := d < 0
	if past {
		d = -d
	}
	var id string
	var n int
	switch {
	case d < time.Minute:
		if past {
			return l.T("time.ago_moment")
		}
		return l.T("time.in_moment")
	case d < time.Hour:
		id, n = "minutes", int(d/time.Minute)
	case d < 48*time.Hour:
		id, n = "hours", int(d/time.Hour)
	default:
		id, n = "days", int(d/(24*time.Hour))
	}
	if past {
		return l.T("time.ago_"+id, "Count", n)
	}
	return l.T("time.in_"+id, "Count", n)
}
