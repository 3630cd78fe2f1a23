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
	On       bool            `env:"SHIPFILE_T_ON" default:"true"`
	Wait     time.Duration   `env:"SHIPFILE_T_WAIT" default:"1m"`
	Schedule []time.Duration `env:"SHIPFILE_T_SCHEDULE" default:"1s, 2m"`
	Nested   nested
}

func TestLoad(t *testing.T) {
	t.Setenv("SHIPFILE_T_COUNT", "7")
	t.Setenv("SHIPFILE_T_PASSWORD", "hunter22")
	var s sample
	if err := Load(&s); err != nil {
		t.Fatal(err)
	}
	want := sample{Addr: "127.0.0.1:1", Count: 7, On: true, Wait: time.Minute,
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
		"SHIPFILE_T_COUNT": "many", "SHIPFILE_T_ON": "perhaps", "SHIPFILE_T_WAIT": "soon", "SHIPFILE_T_SCHEDULE": "1s,x",
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
