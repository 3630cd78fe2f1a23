// Package config fills a service's configuration struct from SHIPFILE_* environment
// variables described by struct tags, and prints them for --help.
//
// A field is configured by its tags:
//
//	Addr string `env:"SHIPFILE_HTTP_ADDR" default:"127.0.0.1:8080" help:"listen address"`
//	Pass string `env:"SHIPFILE_SMTP_PASSWORD" secret:"true" help:"SMTP password"`
//
// Supported field types: string, bool, int, int64, time.Duration and []time.Duration
// (comma separated). A duration is Go's (time.ParseDuration), optionally led by a
// number of days: "365d", "1d12h". Nested structs (embedded or named) are walked recursively.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ErrHelp is returned by Parse when the arguments ask for help; the usage has been printed.
var ErrHelp = errors.New("help requested")

// field is one configurable leaf of a struct.
type field struct {
	env, def, help string
	secret         bool
	value          reflect.Value
}

// Parse handles -h/--help in args (printing the usage of dst to out and returning ErrHelp)
// and otherwise loads dst from the environment.
func Parse(service string, args []string, out io.Writer, dst any) error {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			Usage(out, service, dst)
			return ErrHelp
		}
	}
	return Load(dst)
}

// Load sets every tagged field of the struct pointed to by dst from its environment
// variable, or from its default when the variable is unset or empty.
func Load(dst any) error {
	fields, err := walk(dst)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range fields {
		raw, ok := os.LookupEnv(f.env)
		if !ok || raw == "" {
			raw = f.def
		}
		if err := set(f.value, raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.env, err))
		}
	}
	return errors.Join(errs...)
}

// Usage prints every variable of dst with its default and help text.
func Usage(out io.Writer, service string, dst any) {
	fields, err := walk(dst)
	if err != nil {
		fmt.Fprintln(out, err)
		return
	}
	fmt.Fprintf(out, "Usage: %s\n\nConfigured by environment variables:\n\n", service)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, f := range fields {
		def := f.def
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.env, def, f.help)
	}
	tw.Flush()
}

// LogValue returns the loaded configuration as slog attributes, with secrets masked, for
// logging once at start.
func LogValue(src any) slog.Value {
	fields, err := walk(src)
	if err != nil {
		return slog.StringValue(err.Error())
	}
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		v := fmt.Sprint(f.value.Interface())
		if f.secret && v != "" {
			v = "***"
		}
		attrs = append(attrs, slog.String(f.env, v))
	}
	return slog.GroupValue(attrs...)
}

func walk(dst any) ([]field, error) {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: want a pointer to a struct, got %T", dst)
	}
	var out []field
	collect(v.Elem(), &out)
	return out, nil
}

func collect(v reflect.Value, out *[]field) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		fv := v.Field(i)
		if !sf.IsExported() {
			continue
		}
		env, ok := sf.Tag.Lookup("env")
		if !ok {
			if fv.Kind() == reflect.Struct {
				collect(fv, out)
			}
			continue
		}
		*out = append(*out, field{
			env:    env,
			def:    sf.Tag.Get("default"),
			help:   sf.Tag.Get("help"),
			secret: sf.Tag.Get("secret") == "true",
			value:  fv,
		})
	}
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	durationsType = reflect.TypeFor[[]time.Duration]()
)

// ParseDuration is time.ParseDuration that also takes a leading number of days
// ("365d", "1d12h"; a day is 24h).
func ParseDuration(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok || days == "" || strings.Trim(days, "0123456789") != "" {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseInt(days, 10, 64)
	if err != nil || n > int64(math.MaxInt64/(24*time.Hour)) {
		return 0, fmt.Errorf("time: invalid duration %q", s)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest == "" {
		return d, nil
	}
	r, err := time.ParseDuration(rest)
	if err != nil || r < 0 {
		return 0, fmt.Errorf("time: invalid duration %q", s)
	}
	if d > math.MaxInt64-r {
		return 0, fmt.Errorf("time: invalid duration %q", s)
	}
	return d + r, nil
}

func set(v reflect.Value, raw string) error {
	switch {
	case v.Type() == durationType:
		if raw == "" {
			v.SetInt(0)
			return nil
		}
		d, err := ParseDuration(raw)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case v.Type() == durationsType:
		var ds []time.Duration
		for part := range strings.SplitSeq(raw, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			d, err := ParseDuration(part)
			if err != nil {
				return err
			}
			ds = append(ds, d)
		}
		v.Set(reflect.ValueOf(ds))
	case v.Kind() == reflect.String:
		v.SetString(raw)
	case v.Kind() == reflect.Bool:
		if raw == "" {
			v.SetBool(false)
			return nil
		}
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		if raw == "" {
			v.SetInt(0)
			return nil
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case v.Kind() == reflect.Float64:
		if raw == "" {
			v.SetFloat(0)
			return nil
		}
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%q is not a number", raw)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	return nil
}
