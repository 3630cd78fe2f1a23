package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

const testLink = "https://files.example.com/p/abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"

func testJob(kind string) Job {
	return Job{
		ID:             "0190f0c2-7a8b-7c3d-9e4f-112233445566",
		Kind:           kind,
		PackageID:      "4b2f5c1e-8d3a-4f6b-9c2d-7e1a0b3c4d5e",
		Title:          "Q3 report",
		Note:           "Hi Bob,\r\nhere are the figures.\n<b>Final</b> & signed.",
		RecipientEmail: "bob@example.com",
		RecipientName:  "Bob Builder",
		OwnerName:      "Alice Example",
		OwnerEmail:     "alice@example.com",
		MagicLink:      testLink,
		ExpiresAt:      time.Date(2026, 11, 28, 16, 32, 5, 0, time.UTC),
	}
}

func TestRenderBothKinds(t *testing.T) {
	for _, c := range []struct {
		kind, subject, action, button string
	}{
		{KindOutbound, "Alice Example has shared files with you: Q3 report", "Download the files:", "Download the files"},
		{KindInbound, "Alice Example requests files from you: Q3 report", "Upload your files:", "Upload your files"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			e, err := Render(testJob(c.kind))
			if err != nil {
				t.Fatal(err)
			}
			if e.Subject != c.subject {
				t.Errorf("subject %q, want %q", e.Subject, c.subject)
			}
			if e.To != (Address{Name: "Bob Builder", Address: "bob@example.com"}) {
				t.Errorf("to %+v", e.To)
			}
			if e.ReplyTo != (Address{Name: "Alice Example", Address: "alice@example.com"}) {
				t.Errorf("reply-to %+v", e.ReplyTo)
			}
			if e.SenderName != "Alice Example (via shipfile)" || e.JobID != testJob(c.kind).ID {
				t.Errorf("sender name %q, job id %q", e.SenderName, e.JobID)
			}
			const expiry = "Saturday, 28 November 2026 at 16:32 UTC"
			for _, want := range []string{
				"Hello Bob Builder,",
				"Alice Example (alice@example.com)",
				"Q3 report",
				"Alice Example wrote:\n\nHi Bob,\nhere are the figures.\n<b>Final</b> & signed.\n",
				c.action + "\n" + testLink + "\n",
				"The link works until " + expiry + ".",
			} {
				if !strings.Contains(e.Text, want) {
					t.Errorf("text part lacks %q:\n%s", want, e.Text)
				}
			}
			if strings.Contains(e.Text, "\r") {
				t.Error("text part keeps a CR of the note")
			}
			for _, want := range []string{
				`<a href="` + testLink + `"`,
				">" + c.button + "</a>",
				"Hi Bob,<br>here are the figures.<br>&lt;b&gt;Final&lt;/b&gt; &amp; signed.",
				"<strong>" + expiry + "</strong>",
				"<strong>Alice Example (alice@example.com)</strong>",
				"<title>" + c.subject + "</title>",
			} {
				if !strings.Contains(e.HTML, want) {
					t.Errorf("HTML part lacks %q:\n%s", want, e.HTML)
				}
			}
			if strings.Contains(e.HTML, "<b>Final") {
				t.Error("the note's markup reached the HTML part unescaped")
			}
		})
	}
}

func TestRenderWithoutNoteOrNames(t *testing.T) {
	j := testJob(KindOutbound)
	j.Note, j.RecipientName, j.OwnerName = "", "", ""
	e, err := Render(j)
	if err != nil {
		t.Fatal(err)
	}
	if e.Subject != "alice@example.com has shared files with you: Q3 report" {
		t.Errorf("subject %q", e.Subject)
	}
	if !strings.HasPrefix(e.Text, "Hello,\n\n") || strings.Contains(e.Text, "wrote:") {
		t.Errorf("text:\n%s", e.Text)
	}
	if strings.Contains(e.HTML, "wrote:") || strings.Contains(e.HTML, "<blockquote") {
		t.Error("HTML part shows an empty note")
	}
	if e.To.Name != "" {
		t.Errorf("to name %q", e.To.Name)
	}
}

// A title or a name with CR/LF cannot start a header: they become one line here (and the
// SMTP layer encodes them; see transport's tests for the wire).
func TestRenderMakesHeaderFieldsOneLine(t *testing.T) {
	j := testJob(KindOutbound)
	j.Title = "Invoice\r\nBcc: evil@x.example\r\n\r\nbody"
	j.OwnerName = "Mallory\nBcc: evil@x.example"
	j.RecipientName = "Bob\r\nCc: evil@x.example"
	e, err := Render(j)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"subject": e.Subject, "to name": e.To.Name, "sender name": e.SenderName, "reply-to name": e.ReplyTo.Name} {
		if strings.ContainsAny(v, "\r\n") {
			t.Errorf("%s %q keeps a line break", name, v)
		}
	}
	if want := "Mallory Bcc: evil@x.example has shared files with you: Invoice Bcc: evil@x.example body"; e.Subject != want {
		t.Errorf("subject %q, want %q", e.Subject, want)
	}
}

func TestRenderRefusesUndeliverableJobs(t *testing.T) {
	for name, mod := range map[string]func(*Job){
		"no recipient":           func(j *Job) { j.RecipientEmail = "" },
		"recipient with a name":  func(j *Job) { j.RecipientEmail = "Bob <bob@example.com>" },
		"recipient with CRLF":    func(j *Job) { j.RecipientEmail = "bob@example.com\r\nBcc: evil@x.example" },
		"two recipients":         func(j *Job) { j.RecipientEmail = "bob@example.com, eve@example.com" },
		"no link":                func(j *Job) { j.MagicLink = "" },
		"javascript link":        func(j *Job) { j.MagicLink = "javascript:alert(1)" },
		"relative link":          func(j *Job) { j.MagicLink = "/p/abc" },
		"no expiry":              func(j *Job) { j.ExpiresAt = time.Time{} },
		"link with white space":  func(j *Job) { j.MagicLink = "https://x.example/p/a b" },
		"link with a line break": func(j *Job) { j.MagicLink = "https://x.example/p/a\r\nb" },
	} {
		t.Run(name, func(t *testing.T) {
			j := testJob(KindInbound)
			mod(&j)
			_, err := Render(j)
			if !errors.Is(err, errUndeliverable) {
				t.Fatalf("Render = %v, want an undeliverable job", err)
			}
			if strings.Contains(err.Error(), "abcdefghijklmnop") {
				t.Errorf("error %q contains the magic link", err)
			}
		})
	}
}

func TestReplyToDroppedForAnUnusableOwnerAddress(t *testing.T) {
	j := testJob(KindOutbound)
	j.OwnerEmail = "not an address"
	e, err := Render(j)
	if err != nil {
		t.Fatal(err)
	}
	if e.ReplyTo != (Address{}) {
		t.Errorf("reply-to %+v, want none", e.ReplyTo)
	}
	if strings.Contains(e.Text, "not an address") {
		t.Error("the unusable owner address is shown")
	}
}

func TestParseJob(t *testing.T) {
	good := &eventsv1.MailJob{
		JobId: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Kind: "inbound", PackageId: "4b2f5c1e-8d3a-4f6b-9c2d-7e1a0b3c4d5e",
		Title: "T", Note: "N", RecipientEmail: "bob@example.com", RecipientName: "Bob", OwnerName: "Alice",
		OwnerEmail: "alice@example.com", MagicLink: testLink, ExpiresAt: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
	}
	data, err := events.MarshalMailJob(good)
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseJob(data)
	if err != nil {
		t.Fatal(err)
	}
	want := Job{ID: good.JobId, Kind: "inbound", PackageID: good.PackageId, Title: "T", Note: "N", RecipientEmail: "bob@example.com",
		RecipientName: "Bob", OwnerName: "Alice", OwnerEmail: "alice@example.com", MagicLink: testLink,
		ExpiresAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if j != want {
		t.Errorf("job %+v\nwant %+v", j, want)
	}

	for name, data := range map[string][]byte{
		"not protobuf":   []byte("\xff\xff\xff"),
		"bad job id":     mustMarshal(t, func(m *eventsv1.MailJob) { m.JobId = "job-1" }),
		"bad package id": mustMarshal(t, func(m *eventsv1.MailJob) { m.PackageId = "" }),
		"unknown kind":   mustMarshal(t, func(m *eventsv1.MailJob) { m.Kind = "sideways" }),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseJob(data); !msgerr.IsPoison(err) {
				t.Fatalf("ParseJob = %v, want a msgerr.Poison", err)
			}
		})
	}
}

func mustMarshal(t *testing.T, mod func(*eventsv1.MailJob)) []byte {
	t.Helper()
	m := &eventsv1.MailJob{JobId: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Kind: "outbound", PackageId: "4b2f5c1e-8d3a-4f6b-9c2d-7e1a0b3c4d5e"}
	mod(m)
	// Bypass MarshalMailJob's own checks: the mailer must cope with whatever arrives.
	b, err := protoMarshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"  a\r\nb\tc  ":      "a b c",
		"x\u2028y\u2029z":    "x y z",
		"plain":              "plain",
		"\x00nul\x7fdel\x1b": "nul del",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", maxErrorLen) // 2 bytes each
	got := truncate(long)
	if len(got) > maxErrorLen+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Fatalf("truncate: %d bytes", len(got))
	}
	if strings.ContainsRune(got, '\uFFFD') {
		t.Fatal("truncate cut a rune")
	}
	if truncate("short") != "short" {
		t.Fatal("truncate changed a short text")
	}
}

// TestRenderEncrypted: the e-mail of an end-to-end encrypted package says so, and, for
// shared files, that the key or passphrase comes from the sender separately; the
// e-mails of other packages say nothing of it. ParseJob reads the flag off the job.
func TestRenderEncrypted(t *testing.T) {
	for _, c := range []struct{ kind, want string }{
		{KindOutbound, "To open them you need the key or the passphrase, which Alice Example gives you separately,\nnot in this e-mail."},
		{KindInbound, "your browser encrypts the files for Alice Example\nalone before they leave it"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			job := testJob(c.kind)
			plain, err := Render(job)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(plain.Text, "end-to-end encrypted") || strings.Contains(plain.HTML, "end-to-end encrypted") {
				t.Error("the e-mail of a plain package speaks of encryption")
			}
			job.Encrypted = true
			e, err := Render(job)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(e.Text, "end-to-end encrypted") || !strings.Contains(e.Text, c.want) {
				t.Errorf("text part lacks the encryption notice %q:\n%s", c.want, e.Text)
			}
			if !strings.Contains(e.HTML, "<strong>end-to-end encrypted</strong>") {
				t.Errorf("HTML part lacks the encryption notice:\n%s", e.HTML)
			}
			if !strings.Contains(e.Text, testLink+"\n") || strings.Contains(e.Text, testLink+"#") {
				t.Error("the link is not the plain magic link")
			}
		})
	}
	data, err := events.MarshalMailJob(&eventsv1.MailJob{
		JobId: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Kind: KindOutbound, PackageId: "4b2f5c1e-8d3a-4f6b-9c2d-7e1a0b3c4d5e",
		MagicLink: testLink, ExpiresAt: timestamppb.New(time.Now()), Encrypted: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if job, err := ParseJob(data); err != nil || !job.Encrypted {
		t.Fatalf("ParseJob: encrypted = %v, %v", job.Encrypted, err)
	}
}
