package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// pageLanguages are the recipient's page's languages (pkg/i18n), English first: the
// baseline.
var pageLanguages = []string{"en", "de", "fr", "es", "pt"}

// languagesRow: the recipient's page (GET /p/{token} of a package with three files)
// rendered in each language, asked for with Accept-Language, against English, in
// pages a second over one connection. The languages take turns in slices, each slice
// starting with another one, so that all see the same machine. Target: every
// language within 10 % of English.
func languagesRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report) {
	const what = "recipient page per language"
	nats := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: nats.URL})
	g := s.StartGateway("SHIPFILE_RATE_LIMIT=0", "SHIPFILE_LINK_RATE=0")
	api := rig.NewClient("http://"+g.Addr, s.Token)
	email := openapi_types.Email("bob@example.com")
	p, err := api.CreatePackage(ctx, apiclient.CreatePackage{Title: "Quarterly figures", RecipientEmail: &email})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"figures.xlsx", "summary.pdf", "notes.txt"} {
		if a, err := api.Upload(ctx, p.Id.String(), name, bytes.NewReader([]byte("content of "+name))); err != nil || a.Status != http.StatusCreated {
			t.Fatalf("upload %s: %v %v", name, a.Status, err)
		}
	}
	fin, err := api.Finalize(ctx, p.Id.String())
	if err != nil {
		t.Fatal(err)
	}
	page := fin.MagicLink
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(lang string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
		req.Header.Set("Accept-Language", lang)
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `<html lang="`+lang+`"`) {
			return fmt.Errorf("GET the page in %s: %d", lang, res.StatusCode)
		}
		return nil
	}
	pages, took := map[string]int{}, map[string]time.Duration{}
	perTurn := 200
	if c.quick {
		perTurn = 50
	}
	for slice := 0; ctx.Err() == nil && slice < 2*len(pageLanguages); slice++ {
		for i := range pageLanguages {
			lang := pageLanguages[(slice+i)%len(pageLanguages)]
			start := time.Now()
			for range perTurn {
				if err := get(lang); err != nil {
					if ctx.Err() != nil {
						break
					}
					t.Fatal(err)
				}
				pages[lang]++
			}
			took[lang] += time.Since(start)
		}
	}
	if pages["en"] == 0 {
		rep.Add(Row{What: what, Verdict: "not run (the row's budget ended first)"})
		return
	}
	rate := func(lang string) float64 { return float64(pages[lang]) / took[lang].Seconds() }
	worst, worstLang := 0.0, ""
	var each []string
	for _, lang := range pageLanguages[1:] {
		ratio := rate(lang) / rate("en")
		each = append(each, fmt.Sprintf("%s %.2f×", lang, ratio))
		if worstLang == "" || ratio < worst {
			worst, worstLang = ratio, lang
		}
	}
	rep.Rawf("recipient page per language: pages a second %s; against English: %s", func() string {
		var parts []string
		for _, lang := range pageLanguages {
			parts = append(parts, fmt.Sprintf("%s %.0f", lang, rate(lang)))
		}
		return strings.Join(parts, ", ")
	}(), strings.Join(each, ", "))
	rep.Add(Row{
		What:     what,
		Measured: fmt.Sprintf("%.0f pages/s (%s, the slowest)", rate(worstLang), worstLang),
		Baseline: fmt.Sprintf("%.0f pages/s (English)", rate("en")),
		Ratio:    fmt.Sprintf("%.2f×", worst),
		Target:   "≥ 0.9× (within 10 %)",
		Verdict:  verdict(worst >= 0.9, "%.2f× of English (%s)", worst, worstLang),
	})
}
