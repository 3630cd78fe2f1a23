package servicetest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// OIDCProvider is a private run of deploy/oidc-provider (a real OpenID provider,
// zitadel/oidc's, on 127.0.0.1) for one test.
type OIDCProvider struct {
	// Issuer is its issuer URL; ClientID and ClientSecret its one client's.
	Issuer, ClientID, ClientSecret string
	adminToken, addr               string
	t                              testing.TB
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// OIDCUser is a user of the provider (deploy/oidc-provider's JSON).
type OIDCUser struct {
	Username      string   `json:"username"`
	Password      string   `json:"password"`
	Email         string   `json:"email"`
	EmailVerified bool     `json:"email_verified"`
	Name          string   `json:"name"`
	Groups        []string `json:"groups"`
	Disabled      bool     `json:"disabled"`
}

var (
	oidcBuild    sync.Once
	oidcBin      string
	oidcBuildErr error
)

// OIDCProviderBin is the provider's binary: SHIPFILE_OIDC_PROVIDER_BIN, else built
// once per test process from deploy/oidc-provider (its own module, outside go.work;
// its dependencies come through the Go module proxy once, then from the cache).
func OIDCProviderBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SHIPFILE_OIDC_PROVIDER_BIN"); p != "" {
		return p
	}
	oidcBuild.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			oidcBuildErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				oidcBuildErr = fmt.Errorf("no go.work above the test's directory")
				return
			}
			dir = parent
		}
		out, err := os.MkdirTemp("", "shipfile-oidc-provider-")
		if err != nil {
			oidcBuildErr = err
			return
		}
		oidcBin = filepath.Join(out, "oidc-provider")
		cmd := exec.Command("go", "build", "-o", oidcBin, ".")
		cmd.Dir = filepath.Join(dir, "deploy", "oidc-provider")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			oidcBuildErr = fmt.Errorf("build deploy/oidc-provider: %v\n%s", err, b)
		}
	})
	if oidcBuildErr != nil {
		t.Fatal(oidcBuildErr)
	}
	return oidcBin
}

// StartOIDCProvider runs a provider for the test, with the given users, on a free
// port; issuer, when not empty, is the issuer it names (a proxy in front of it).
// It returns once discovery answers.
func StartOIDCProvider(t testing.TB, issuer string, users []OIDCUser, extra ...string) *OIDCProvider {
	t.Helper()
	addr := FreeAddr(t)
	if issuer == "" {
		issuer = "http://" + addr
	}
	p := &OIDCProvider{Issuer: issuer, ClientID: "shipfile-test", ClientSecret: "secret-" + randHex(8), adminToken: randHex(16), t: t}
	b, _ := json.Marshal(map[string]any{"users": users})
	file := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-addr", addr, "-issuer", issuer, "-client-id", p.ClientID, "-client-secret", p.ClientSecret,
		"-users", file, "-admin-token", p.adminToken}, extra...)
	StartProcess(t, OIDCProviderBin(t), nil, args...)
	client := &http.Client{Timeout: 2 * time.Second}
	WaitFor(t, 30*time.Second, "the OpenID provider at "+addr, func() bool {
		resp, err := client.Get("http://" + addr + "/.well-known/openid-configuration")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	p.Issuer = issuer
	p.addr = addr
	return p
}

// Addr is where the provider listens (host:port).
func (p *OIDCProvider) Addr() string { return p.addr }

// PutUser creates or replaces a user.
func (p *OIDCProvider) PutUser(u OIDCUser) {
	p.t.Helper()
	b, _ := json.Marshal(u)
	p.admin(http.MethodPut, "/admin/users/"+u.Username, b)
}

// RotateKeys makes the provider sign with a new key and returns its id.
func (p *OIDCProvider) RotateKeys() string {
	p.t.Helper()
	var out struct {
		KID string `json:"kid"`
	}
	_ = json.Unmarshal(p.admin(http.MethodPost, "/admin/rotate-keys", nil), &out)
	return out.KID
}

func (p *OIDCProvider) admin(method, path string, body []byte) []byte {
	p.t.Helper()
	req, _ := http.NewRequest(method, "http://"+p.addr+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}

// AdminRequest sends a request to the provider's admin API, with its admin token when
// withToken, and returns the status and the body.
func (p *OIDCProvider) AdminRequest(method, path string, withToken bool) (int, []byte) {
	p.t.Helper()
	req, _ := http.NewRequest(method, "http://"+p.addr+path, nil)
	if withToken {
		req.Header.Set("Authorization", "Bearer "+p.adminToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
