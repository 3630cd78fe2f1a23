package transfer

import "testing"

func TestParseLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw             string
		base, token, fragment string
		wantErr               bool
	}{
		{name: "plain", raw: "https://files.example.com/p/abc_DEF-123", base: "https://files.example.com", token: "abc_DEF-123"},
		{name: "under a path", raw: "http://127.0.0.1:8080/shipfile/p/tok/", base: "http://127.0.0.1:8080/shipfile", token: "tok"},
		{name: "with a key", raw: "https://h/p/tok#AGE-SECRET-KEY-1XYZ", base: "https://h", token: "tok", fragment: "AGE-SECRET-KEY-1XYZ"},
		{name: "spaces around", raw: "  https://h/p/tok\n", base: "https://h", token: "tok"},
		{name: "no /p/", raw: "https://h/x/tok", wantErr: true},
		{name: "no token", raw: "https://h/p/", wantErr: true},
		{name: "deeper path", raw: "https://h/p/tok/files", wantErr: true},
		{name: "no scheme", raw: "h/p/tok", wantErr: true},
		{name: "other scheme", raw: "ftp://h/p/tok", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ParseLink(tc.raw)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseLink(%q) = %+v, want an error", tc.raw, l)
				}
				return
			}
			if err != nil || l.Base != tc.base || l.Token != tc.token || l.Fragment != tc.fragment {
				t.Fatalf("ParseLink(%q) = %+v, %v; want %s %s %s", tc.raw, l, err, tc.base, tc.token, tc.fragment)
			}
		})
	}
}
