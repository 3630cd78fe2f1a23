package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestNormalizeContentType(t *testing.T) {
	cases := map[string]string{
		"":                           "application/octet-stream",
		"text/plain":                 "text/plain",
		"Text/HTML; Charset=UTF-8":   "text/html; charset=utf-8",
		"image/png; name=x.png; q=1": "image/png",
		"not a type":                 "application/octet-stream",
		"text":                       "application/octet-stream",
		"application/" + strings.Repeat("x", 120):         "application/octet-stream",
		"text/plain; charset=" + strings.Repeat("y", 120): "text/plain",
		"text/plain; x=" + strings.Repeat("a", 60<<10):    "application/octet-stream",
	}
	for in, want := range cases {
		if got := NormalizeContentType(in); got != want {
			t.Errorf("NormalizeContentType(%.40q) = %q, want %q", in, got, want)
		}
		if got := NormalizeContentType(in); len(got) > MaxContentTypeLen {
			t.Errorf("NormalizeContentType(%.40q) is %d long", in, len(got))
		}
	}
}

func TestNewClientCutsUserAgent(t *testing.T) {
	long := strings.Repeat("é", 600) // two bytes each: the cut must not split one
	c := NewClient("192.0.2.1", long)
	if len(c.UserAgent) > MaxUserAgentLen || !utf8.ValidString(c.UserAgent) || len(c.UserAgent) < MaxUserAgentLen-1 {
		t.Fatalf("cut User-Agent: %d bytes, valid %v", len(c.UserAgent), utf8.ValidString(c.UserAgent))
	}
	if c := NewClient("", "curl/8"); c.UserAgent != "curl/8" {
		t.Fatalf("short User-Agent changed: %q", c.UserAgent)
	}
}

func TestValidateFilenameRefusesHiddenCharacters(t *testing.T) {
	for _, name := range []string{"invoice\u202Efdp.exe", "a\u200Bb", "a\u2066b", "\ufeffa", "a\x00b", "a\x7fb", "a\u0085b"} {
		if err := ValidateFilename(name); KindOf(err) != KindInvalid {
			t.Errorf("ValidateFilename(%q) = %v, want invalid", name, err)
		}
	}
	for _, name := range []string{"report.pdf", "Zürich – 2024.txt", "日本語.txt", "emoji 😀.png"} {
		if err := ValidateFilename(name); err != nil {
			t.Errorf("ValidateFilename(%q) = %v", name, err)
		}
	}
}

func TestHasherBusy(t *testing.T) {
	h := NewHasher(1, 20*time.Millisecond)
	h.slots <- struct{}{} // someone holds the only slot
	start := time.Now()
	_, err := h.Hash(context.Background(), "a long enough password")
	var e *Error
	if KindOf(err) != KindBusy || !errors.As(err, &e) || e.RetryAfter <= 0 {
		t.Fatalf("Hash with no free slot = %v, want KindBusy with RetryAfter", err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond || waited > time.Second {
		t.Fatalf("waited %s for a slot, want about 20ms", waited)
	}
	if _, err := h.Verify(context.Background(), DummyHash, "x"); KindOf(err) != KindBusy {
		t.Fatalf("Verify with no free slot = %v", err)
	}
	<-h.slots
	hash, err := h.Hash(context.Background(), "a long enough password")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := h.Verify(context.Background(), hash, "a long enough password"); !ok || err != nil {
		t.Fatalf("Verify = %v %v", ok, err)
	}
	if ok, _ := h.Verify(context.Background(), hash, "another password"); ok {
		t.Fatal("a wrong password verified")
	}
	// A crafted hash asking for more memory than ours is no match, and costs a normal run.
	if ok, _ := h.Verify(context.Background(), "$argon2id$v=19$m=4194304,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5", "x"); ok {
		t.Fatal("a crafted hash verified")
	}
	if h.Runs() != 4 {
		t.Fatalf("runs = %d, want 4", h.Runs())
	}
}
