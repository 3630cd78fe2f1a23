package config

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

type nested struct {
	Password string `env:"SHIPFILE_T_PASSWORD" secret:"true" help:"a secret"`
}

type sample struct {
	Addr     string          `env:"SHIPFILE_T_ADDR" default:"127.0.0.1:1" help:"address"`
	Count    int             `env:"SHIPFILE_T_COUNT" default:"3"`
	Rate     float64         `env:"SHIPFILE_T_RATE" default:"1"`
	On       bool            `env:"SHIPFILE_T_ON" default:"true"`
	Wait     time.Duration   `env:"SHIPFILE_T_WAIT" default:"1m"`
	Schedule []time.Duration `env:"SHIPFILE_T_SCHEDULE" default:"1s, 2m"`
	Nested   nested
}

func TestLoad(t *testing.T) {
	t.Setenv("SHIPFILE_T_COUNT", "7")
	t.Setenv("SHIPFILE_T_RATE", "0.25")
	t.Setenv("SHIPFILE_T_PASSWORD", "hunter22")
	var s sample
	if err := Load(&s); err != nil {
		t.Fatal(err)
	}
	want := sample{Addr: "127.0.0.1:1", Count: 7, Rate: 0.25, On: true, Wait: time.Minute,
		Schedule: []time.Duration{time.Second, 2 * time.Minute}, Nested: nested{Password: "hunter22"}}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if logged := LogValue(&s).String(); strings.Contains(logged, "hunter22") || !strings.Contains(logged, "***") {
		t.Fatalf("secret not masked: %s", logged)
	}
}

func TestLoadRejectsBadValues(t *testing.T) {
	for env, val := range map[string]string{
		"SHIPFILE_T_COUNT": "many", "SHIPFILE_T_RATE": "NaN", "SHIPFILE_T_ON": "perhaps", "SHIPFILE_T_WAIT": "soon", "SHIPFILE_T_SCHEDULE": "1s,x",
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, val)
			err := Load(&sample{})
			if err == nil || !strings.Contains(err.Error(), env) {
				t.Fatalf("Load = %v, want an error naming %s", err, env)
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	var out bytes.Buffer
	err := Parse("svc", []string{"--help"}, &out, &sample{})
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("Parse = %v, want ErrHelp", err)
	}
	for _, s := range []string{"SHIPFILE_T_ADDR", "127.0.0.1:1", "address", "SHIPFILE_T_PASSWORD"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("usage lacks %q:\n%s", s, out.String())
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"365d", 365 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"0d", 0, true},
		{"90m", 90 * time.Minute, true},
		{"1.5h", 90 * time.Minute, true},
		{"d", 0, false},
		{"1dd", 0, false},
		{"-1d", 0, false},
		{"1d-1h", 0, false},
		{"99999999999999999999d", 0, false},
		{"200000d", 0, false},
	} {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseDuration(%q) = %v, %v", c.in, got, err)
		}
	}
}
