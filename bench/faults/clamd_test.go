//go:build faults

package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// download is an answer of the owner's download route: status, Retry-After, the JSON
// error's scan field, and the bytes of a 200.
type download struct {
	status     int
	retryAfter string
	scan       string
	body       []byte
}

// ownerDownload asks for a file of a package as the stack's admin, its owner.
func ownerDownload(t *testing.T, s *rig.Stack, pkg, file string) download {
	t.Helper()
	req, err := http.NewRequest("GET", s.API.Base+"/api/v1/packages/"+pkg+"/files/"+file+"/content", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.API.Token)
	resp, err := s.API.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	d := download{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Scan string `json:"scan"`
		}
		_ = json.Unmarshal(b, &e)
		d.scan = e.Scan
	}
	return d
}

// linkUpload uploads content as filename through the link token, without credentials.
func linkUpload(t *testing.T, s *rig.Stack, token, filename string, content []byte) {
	t.Helper()
	body, contentType := rig.MultipartFile(filename, bytes.NewReader(content))
	resp, err := http.Post(s.API.Base+"/api/v1/links/"+token+"/files", contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload %s through the link: %d %s", filename, resp.StatusCode, b)
	}
}

// scanStates reads the scan state of every file of the packages, by file id.
func scanStates(t *testing.T, s *rig.Stack, pkgs []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range pkgs {
		a := s.API.Must(t, "GET", "/api/v1/packages/"+p, nil, http.StatusOK)
		for _, f := range a.JSON["files"].([]any) {
			m := f.(map[string]any)
			out[m["id"].(string)] = m["scan"].(string)
		}
	}
	return out
}

// TestClamdOutage: clamd is stopped while strangers upload files, EICAR among them,
// through file requests (SHIPFILE_SCAN=block). Every upload is taken and stays pending;
// the owner's downloads are answered 409 {"detail", "scan": "pending"} with Retry-After,
// so nothing is served unscanned; once clamd is back every verdict arrives: EICAR
// infected (its object gone, 410), the others clean and served whole.
func TestClamdOutage(t *testing.T) {
	cd := servicetest.StartClamd(t, "")
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL, Env: []string{"SHIPFILE_CLAMD_ADDR=" + cd.Addr}})
	s.StartGateway("SHIPFILE_SCAN=block", "SHIPFILE_RATE_LIMIT=0")
	s.StartService("scanner", "SHIPFILE_SCAN_RETRY_MAX=1s", "SHIPFILE_SCAN_ACK_WAIT=5s")

	const requests, cleanPerRequest = 4, 3
	type upload struct{ pkg, name string }
	var pkgs, tokens []string
	for i := range requests {
		p := s.API.Must(t, "POST", "/api/v1/packages", map[string]any{
			"title": "Request " + itoa(i), "recipient_email": "stranger@example.com", "direction": "inbound"}, http.StatusCreated)
		id := p.Str("id")
		fin := s.API.Must(t, "POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
		pkgs, tokens = append(pkgs, id), append(tokens, rig.LinkToken(fin.Str("magic_link")))
	}

	stopped := time.Now()
	cd.Stop()
	content := map[string][]byte{}
	for i, tok := range tokens {
		linkUpload(t, s, tok, "invoice.pdf", servicetest.EICAR)
		for j := range cleanPerRequest {
			name := fmt.Sprintf("report-%d-%d.txt", i, j)
			content[name] = []byte(fmt.Sprintf("quarterly report %d of request %d\n", j, i))
			linkUpload(t, s, tok, name, content[name])
		}
	}
	names := map[string]upload{}
	for _, p := range pkgs {
		a := s.API.Must(t, "GET", "/api/v1/packages/"+p, nil, http.StatusOK)
		for _, f := range a.JSON["files"].([]any) {
			m := f.(map[string]any)
			names[m["id"].(string)] = upload{pkg: p, name: m["filename"].(string)}
		}
	}
	if len(names) != requests*(cleanPerRequest+1) {
		t.Fatalf("%d files recorded, want %d", len(names), requests*(cleanPerRequest+1))
	}

	// The outage: every owner's download is asked for, again and again, until it ends.
	var asked, held, served, other int
	var example download
	until := time.Now().Add(max(*load/2, 4*time.Second))
	for time.Now().Before(until) {
		for id, u := range names {
			d := ownerDownload(t, s, u.pkg, id)
			asked++
			switch {
			case d.status == http.StatusConflict && d.scan == "pending" && d.retryAfter != "":
				held++
			case d.status == http.StatusOK:
				served++
				example = d
			default:
				other++
				example = d
			}
		}
	}
	pending := 0
	for _, st := range scanStates(t, s, pkgs) {
		if st == "pending" {
			pending++
		}
	}
	record(t, "files uploaded through requests while clamd was down", len(names))
	record(t, "owner's downloads asked during the outage", asked)
	record(t, "held (409, scan pending, Retry-After)", held)
	record(t, "served unscanned", served)
	record(t, "still pending when clamd came back", pending)
	if served > 0 || other > 0 || held != asked {
		t.Errorf("during the outage %d of %d owner's downloads were served and %d answered otherwise than 409 pending with Retry-After (e.g. %d %q scan %q)",
			served, asked, other, example.status, example.retryAfter, example.scan)
	}
	if pending != len(names) {
		t.Errorf("%d of %d files pending while clamd was down, want all", pending, len(names))
	}

	restarted := time.Now()
	record(t, "clamd down for", restarted.Sub(stopped).Round(100*time.Millisecond).String())
	cd.Start()
	var states map[string]string
	servicetest.WaitFor(t, 120*time.Second, "every verdict after clamd came back", func() bool {
		states = scanStates(t, s, pkgs)
		for _, st := range states {
			if st == "pending" {
				return false
			}
		}
		return true
	})
	record(t, "every verdict in after clamd was back", fmt.Sprintf("%.1f s", time.Since(restarted).Seconds()))
	var infected, clean int
	for id, u := range names {
		d := ownerDownload(t, s, u.pkg, id)
		switch {
		case u.name == "invoice.pdf":
			if states[id] != "infected" || d.status != http.StatusGone {
				t.Errorf("EICAR in %s: scan %s, download %d; want infected and 410", u.pkg, states[id], d.status)
			} else {
				infected++
			}
		case states[id] != "clean" || d.status != http.StatusOK || !bytes.Equal(d.body, content[u.name]):
			t.Errorf("%s: scan %s, download %d (%d bytes); want clean and served whole", u.name, states[id], d.status, len(d.body))
		default:
			clean++
		}
	}
	record(t, "verdicts: infected / clean / other", triple(int64(infected), int64(clean), int64(len(names)-infected-clean)))
}
