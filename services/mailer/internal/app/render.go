package app

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"net/mail"
	"net/url"
	"strings"
	texttemplate "text/template"
	"unicode"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/i18n"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// catalog holds the e-mails' words in every language (pkg/i18n/locales, "mail.*").
var catalog = i18n.MustNew()

// mailFuncs are the HTML templates' helpers: strong puts a value in bold.
var mailFuncs = htmltemplate.FuncMap{"strong": i18n.Strong}

// SenderSuffix follows the owner's name in the From header's display name when the
// configured sender has none of its own.
const SenderSuffix = " (via shipfile)"

//go:embed templates/*.tmpl
var templateFS embed.FS

// kindSpec is what differs between the two kinds of e-mail.
type kindSpec struct {
	subject string // the catalog message of the subject: Owner (the owner's name), Title
	button  string // the catalog message of the button
	text    *texttemplate.Template
	html    *htmltemplate.Template
}

var kinds = map[string]kindSpec{
	KindOutbound: {
		subject: "mail.outbound.shared",
		button:  "mail.outbound.button",
		text:    texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/outbound.txt.tmpl")),
		html:    htmltemplate.Must(htmltemplate.New("layout").Funcs(mailFuncs).ParseFS(templateFS, "templates/layout.html.tmpl", "templates/outbound.html.tmpl")),
	},
	KindInbound: {
		subject: "mail.inbound.shared",
		button:  "mail.inbound.button",
		text:    texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/inbound.txt.tmpl")),
		html:    htmltemplate.Must(htmltemplate.New("layout").Funcs(mailFuncs).ParseFS(templateFS, "templates/layout.html.tmpl", "templates/inbound.html.tmpl")),
	},
}

// ParseJob decodes a job message and checks what the mailer needs to know which job it
// is: a job id and package id that are UUIDs, a known kind. Anything else is a
// msgerr.Poison. Whether the job can be sent (recipient address, link) is Render's question.
func ParseJob(data []byte) (Job, error) {
	m, err := events.UnmarshalMailJob(data)
	if err != nil {
		return Job{}, msgerr.Poison(fmt.Errorf("mail job: %w", err))
	}
	if _, err := uuid.Parse(m.GetJobId()); err != nil {
		return Job{}, msgerr.Poison(fmt.Errorf("mail job: job_id %q is not a UUID", m.GetJobId()))
	}
	if _, err := uuid.Parse(m.GetPackageId()); err != nil {
		return Job{}, msgerr.Poison(fmt.Errorf("mail job %s: package_id %q is not a UUID", m.GetJobId(), m.GetPackageId()))
	}
	if _, ok := kinds[m.GetKind()]; !ok {
		return Job{}, msgerr.Poison(fmt.Errorf("mail job %s: unknown kind %q", m.GetJobId(), m.GetKind()))
	}
	job := Job{
		ID:             m.GetJobId(),
		Kind:           m.GetKind(),
		PackageID:      m.GetPackageId(),
		Title:          m.GetTitle(),
		Note:           m.GetNote(),
		RecipientEmail: m.GetRecipientEmail(),
		RecipientName:  m.GetRecipientName(),
		OwnerName:      m.GetOwnerName(),
		OwnerEmail:     m.GetOwnerEmail(),
		MagicLink:      m.GetMagicLink(),
		Encrypted:      m.GetEncrypted(),
		Language:       m.GetLanguage(),
	}
	if m.GetExpiresAt() != nil {
		job.ExpiresAt = m.GetExpiresAt().AsTime()
	}
	return job, nil
}

// errUndeliverable marks a job that can never be sent as it is (no usable recipient
// address or link): it is recorded as failed, not retried.
var errUndeliverable = errors.New("undeliverable")

// view is what the templates see. Every field but Note and NoteLines is one line.
type view struct {
	Subject       string
	RecipientName string
	OwnerName     string // the owner's name, or address when they have no name
	Owner         string // "Alice Example (alice@example.com)"
	Title         string
	Note          string   // the note, its lines normalised to \n
	NoteLines     []string // the note's lines, for the HTML part
	Link          string
	Button        string
	Expires       string // the expiry in words, in UTC (i18n.Localizer.DateLong)
	// Encrypted: the package is end-to-end encrypted; the link mailed here carries no
	// key (docs/ENCRYPTION.md).
	Encrypted bool
	// L says the e-mail's words in the recipient's language.
	L *i18n.Localizer
}

// Render builds the e-mail of job. It fails (wrapping errUndeliverable) when the job
// has no usable recipient address, magic link or expiry. Names and the title are made
// single lines here, whatever they hold, so they can never add a header.
func Render(job Job) (Email, error) {
	spec, ok := kinds[job.Kind]
	if !ok {
		return Email{}, msgerr.Poison(fmt.Errorf("mail job: unknown kind %q", job.Kind))
	}
	to, err := mailbox(job.RecipientEmail)
	if err != nil {
		return Email{}, fmt.Errorf("%w: invalid recipient address: %v", errUndeliverable, err)
	}
	if err := checkLink(job.MagicLink); err != nil {
		return Email{}, fmt.Errorf("%w: %v", errUndeliverable, err)
	}
	if job.ExpiresAt.IsZero() {
		return Email{}, fmt.Errorf("%w: the job has no expiry", errUndeliverable)
	}
	to.Name = OneLine(job.RecipientName)
	l := catalog.Localizer(job.Language)

	ownerName := OneLine(job.OwnerName)
	ownerEmail := OneLine(job.OwnerEmail)
	replyTo, err := mailbox(ownerEmail)
	if err != nil {
		replyTo, ownerEmail = Address{}, ""
	}
	if ownerName == "" {
		ownerName = ownerEmail
	}
	if ownerName == "" {
		ownerName = l.T("mail.someone")
	}
	owner := ownerName
	if ownerEmail != "" && ownerEmail != ownerName {
		owner = fmt.Sprintf("%s (%s)", ownerName, ownerEmail)
	}
	replyTo.Name = ownerName
	if replyTo.Address == "" {
		replyTo.Name = ""
	}

	note := normaliseNote(job.Note)
	v := view{
		Subject:       OneLine(l.T(spec.subject, "Owner", ownerName, "Title", OneLine(job.Title))),
		RecipientName: to.Name,
		OwnerName:     ownerName,
		Owner:         owner,
		Title:         OneLine(job.Title),
		Note:          note,
		Link:          job.MagicLink,
		Button:        l.T(spec.button),
		Expires:       l.DateLong(job.ExpiresAt),
		Encrypted:     job.Encrypted,
		L:             l,
	}
	if note != "" {
		v.NoteLines = strings.Split(note, "\n")
	}
	var text, html bytes.Buffer
	if err := spec.text.Execute(&text, v); err != nil {
		return Email{}, fmt.Errorf("render %s text: %w", job.Kind, err)
	}
	if err := spec.html.ExecuteTemplate(&html, "layout", v); err != nil {
		return Email{}, fmt.Errorf("render %s html: %w", job.Kind, err)
	}
	return Email{
		JobID:      job.ID,
		To:         to,
		ReplyTo:    replyTo,
		SenderName: ownerName + SenderSuffix,
		Subject:    v.Subject,
		Text:       text.String(),
		HTML:       html.String(),
		Language:   l.Lang,
	}, nil
}

// OneLine turns s into one line of text: control characters (CR, LF, tab, …) and Unicode
// line and paragraph separators become spaces, runs of white space one space, and the
// ends are trimmed.
func OneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// normaliseNote keeps the note's line breaks (as \n) and drops other control characters.
func normaliseNote(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// mailbox checks that s is a bare e-mail address (no display name, nothing around it).
func mailbox(s string) (Address, error) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return Address{}, err
	}
	if a.Name != "" || a.Address != s {
		return Address{}, errors.New("not a bare address")
	}
	return Address{Address: a.Address}, nil
}

// checkLink accepts an absolute http(s) URL. Its error never contains the link.
func checkLink(link string) error {
	if link == "" {
		return errors.New("the job has no magic link")
	}
	u, err := url.Parse(link)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsFunc(link, unicode.IsSpace) {
		return errors.New("the magic link is not an absolute http(s) URL")
	}
	return nil
}
