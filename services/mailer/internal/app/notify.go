package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"log/slog"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/shipfile/shipfile/pkg/backoff"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/i18n"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// Kinds of owner notification (owner_notifications.kind).
const (
	NotifyDownloaded = "downloaded" // an outbound package's first download
	NotifyUploads    = "uploads"    // a burst of recipient uploads to an inbound package
	// NotifyInfected: the scanner found malware in a file (services/scanner writes the
	// row with its verdict). Sent whatever notify_owner says: it is a security notice.
	NotifyInfected = "infected"
)

// Notification states (owner_notifications.state) beyond the delivery states.
const (
	NotifyOpen    = "open"    // a burst still taking uploads
	NotifyDropped = "dropped" // not sent: the owner turned notifications off, or has no usable address
)

// NotifyStore is what the owner notifications need of the database.
type NotifyStore interface {
	// RecordDownload notes an outbound package's download: the first one (while the
	// package's notify_owner is on) makes its one notification, due at once, naming
	// the recipient whose link was used (recipientEmail).
	RecordDownload(ctx context.Context, packageID, recipientEmail string) error
	// RecordUpload adds a recipient's upload to the inbound package's open burst (while
	// its notify_owner is on), opening one if none is, and moves the burst's due time
	// to quiet from now. A file already recorded adds nothing.
	RecordUpload(ctx context.Context, u Upload, quiet time.Duration) error
	// CloseDueBursts closes the open bursts whose quiet time has passed: later uploads
	// start new bursts.
	CloseDueBursts(ctx context.Context) error
	// SendDue locks one due notification that no other instance holds, calls fn with it
	// and writes fn's outcome (and its audit entry) in the same transaction. false: no
	// notification was due.
	SendDue(ctx context.Context, fn func(Notification) Outcome) (bool, error)
	// SendDueAccount does the same with one due account notice (kind NotifyAccount).
	SendDueAccount(ctx context.Context, fn func(Notification) Outcome) (bool, error)
}

// Upload is a recipient's upload as the event tells it.
type Upload struct {
	PackageID string
	FileID    string
	Filename  string
	Size      int64
	At        time.Time
	// RecipientEmail is the recipient whose link it came through; each recipient's
	// uploads make a burst of their own, which names them.
	RecipientEmail string
}

// Notification is an owner notification as the store holds it when it is sent.
type Notification struct {
	ID             int64
	Kind           string
	PackageID      string
	Attempts       int
	Title          string
	RecipientEmail string
	RecipientName  string
	OwnerEmail     string
	OwnerName      string
	// OwnerLanguage is the language the owner chose (pkg/i18n): the e-mail is written
	// in it; English when empty or not supported.
	OwnerLanguage string
	NotifyOwner   bool
	Files         []NotifiedFile // the burst's files, oldest first (uploads)
	// Filename and Signature: the infected file and what clamd found (infected).
	Filename  string
	Signature string
	// AccountEvent and AccountDetail: what changed on the account (NotifyAccount,
	// sent to OwnerEmail, the user's address).
	AccountEvent  string
	AccountDetail string
}

// NotifiedFile is a file of an upload burst.
type NotifiedFile struct {
	Name string
	Size int64
}

// NotifierOptions tune a Notifier.
type NotifierOptions struct {
	// PublicURL is the gateway's public URL: the package's page is PublicURL/packages/{id}.
	PublicURL string
	// Quiet is how long a burst waits for a further upload (SHIPFILE_NOTIFY_QUIET).
	Quiet time.Duration
	// Schedule holds the waits after failed attempts, as for mail jobs.
	Schedule []time.Duration
}

// Notifier tells package owners of downloads and recipient uploads.
type Notifier struct {
	store   NotifyStore
	sender  Sender
	metrics *Metrics
	log     *slog.Logger
	opts    NotifierOptions
}

// NewNotifier returns a Notifier.
func NewNotifier(store NotifyStore, sender Sender, metrics *Metrics, log *slog.Logger, opts NotifierOptions) *Notifier {
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	if opts.Quiet <= 0 {
		opts.Quiet = time.Minute
	}
	return &Notifier{store: store, sender: sender, metrics: metrics, log: log.With("part", "notify"), opts: opts}
}

// HandleEvent records a package.downloaded or package.file_uploaded event (other
// events are acknowledged and ignored): the message is acknowledged once the
// notification's state is committed. It returns nil (done), a msgerr.Poison (not an
// envelope) or a msgerr.RetryAfter (the store failed; again after a back-off).
func (n *Notifier) HandleEvent(ctx context.Context, data []byte, numDelivered uint64) error {
	env, err := events.UnmarshalEnvelope(data)
	if err != nil {
		return msgerr.Poison(err)
	}
	switch d := env.GetData().(type) {
	case *eventsv1.Envelope_PackageDownloaded:
		if d.PackageDownloaded.GetPackage().GetDirection() != KindOutbound {
			return nil
		}
		pkg := d.PackageDownloaded.GetPackage()
		err = n.store.RecordDownload(ctx, pkg.GetPackageId(), pkg.GetRecipientEmail())
	case *eventsv1.Envelope_FileUploaded:
		fu := d.FileUploaded
		if fu.GetUploadedBy() != "recipient" || fu.GetPackage().GetDirection() != KindInbound {
			return nil
		}
		at := time.Now()
		if env.GetOccurredAt() != nil {
			at = env.GetOccurredAt().AsTime()
		}
		err = n.store.RecordUpload(ctx, Upload{
			PackageID: fu.GetPackage().GetPackageId(), FileID: fu.GetFileId(), Filename: fu.GetFilename(), Size: fu.GetSize(), At: at,
			RecipientEmail: fu.GetPackage().GetRecipientEmail(),
		}, n.opts.Quiet)
	default:
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return msgerr.RetryAfter(0, nil)
		}
		n.log.Warn("notification event not recorded; it will be tried again", "event_id", env.GetEventId(), "err", err)
		return msgerr.RetryAfter(backoff.TransientDelay(numDelivered), nil)
	}
	return nil
}

// Tick closes the bursts that have been quiet long enough and sends every due
// notification, one at a time, until none is due or stop is done; each instance runs
// it on a timer. ctx bounds the work itself (a send in flight when stop comes
// finishes on it).
func (n *Notifier) Tick(stop, ctx context.Context) {
	if stop.Err() != nil {
		return
	}
	if err := n.store.CloseDueBursts(ctx); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("close due bursts", "err", err)
		}
		return
	}
	for _, sendDue := range []func(context.Context, func(Notification) Outcome) (bool, error){n.store.SendDue, n.store.SendDueAccount} {
		for stop.Err() == nil && ctx.Err() == nil {
			more, err := sendDue(ctx, n.send(ctx))
			if err != nil {
				if ctx.Err() == nil {
					n.log.Warn("send due notification", "err", err)
				}
				return
			}
			if !more {
				break
			}
		}
	}
}

// send returns the attempt of one notification: render, send, decide what is
// recorded, by the recipient e-mails' rules.
func (n *Notifier) send(ctx context.Context) func(Notification) Outcome {
	return func(no Notification) Outcome {
		log := n.log.With("notification_id", no.ID, "package_id", no.PackageID, "kind", no.Kind)
		if !no.NotifyOwner && no.Kind != NotifyInfected && no.Kind != NotifyAccount {
			log.Info("notification dropped: the owner turned notifications off")
			return Outcome{State: NotifyDropped}
		}
		email, err := RenderNotification(no, n.opts.PublicURL)
		to := OneLine(no.OwnerEmail)
		if err != nil {
			log.Warn("notification not sent", "err", err)
			return Outcome{State: StateFailed, Error: truncate(err.Error()), AuditAction: ActionFailed,
				AuditDetail: truncate(fmt.Sprintf("owner notification to %s: not sent: %v", to, err))}
		}
		attempt := no.Attempts + 1
		start := time.Now()
		id, err := n.sender.Send(ctx, email)
		n.metrics.SendDuration.Observe(time.Since(start).Seconds())
		var rej *Rejection
		switch {
		case err == nil:
			log.Info("owner notification sent", "attempt", attempt, "message_id", id)
			n.metrics.Jobs.WithLabelValues(OutcomeSent).Inc()
			return Outcome{State: StateSent, Attempted: true, MessageID: id, AuditAction: ActionSent,
				AuditDetail: truncate("owner notification (" + no.Kind + ") to " + to)}
		case errors.As(err, &rej):
			n.metrics.Jobs.WithLabelValues(OutcomeFailed).Inc()
			return Outcome{State: StateFailed, Attempted: true, Error: truncate(err.Error()), AuditAction: ActionFailed,
				AuditDetail: truncate(fmt.Sprintf("owner notification to %s: %s", to, rej.Text()))}
		case ctx.Err() != nil:
			return Outcome{} // stopping: the row stays due for another instance
		}
		wait, more := backoff.RetryWait(n.opts.Schedule, attempt)
		if !more {
			n.metrics.Jobs.WithLabelValues(OutcomeFailed).Inc()
			return Outcome{State: StateFailed, Attempted: true, Error: truncate(err.Error()), AuditAction: ActionFailed,
				AuditDetail: truncate(fmt.Sprintf("owner notification to %s: gave up after %d attempts: %v", to, attempt, err))}
		}
		log.Warn("owner notification failed; will retry", "attempt", attempt, "err", err, "retry_in", wait.String())
		n.metrics.Jobs.WithLabelValues(OutcomeRetried).Inc()
		return Outcome{State: StatePending, Attempted: true, Error: truncate(err.Error()), RetryIn: wait}
	}
}

// notifyView is what the notification templates see. Every field is one line.
type notifyView struct {
	Subject   string
	OwnerName string
	Recipient string
	Title     string
	Link      string
	Files     []notifyFile
	// Infected is the infected file's name and Signature what clamd found (infected).
	Infected  string
	Signature string
	// L says the e-mail's words in the owner's language.
	L *i18n.Localizer
}

type notifyFile struct {
	Name string
	Size string
}

var (
	notifyText = texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/notify.txt.tmpl"))
	notifyHTML = htmltemplate.Must(htmltemplate.New("notify.html.tmpl").Funcs(mailFuncs).ParseFS(templateFS, "templates/notify.html.tmpl"))
)

// RenderNotification builds the owner's e-mail of a notification, in the owner's
// language: "{recipient} downloaded {title}", or the files of an upload burst, with a
// link to the package's page. It fails when the owner has no usable address.
func RenderNotification(no Notification, publicURL string) (Email, error) {
	if no.Kind == NotifyAccount {
		return renderAccount(no, publicURL)
	}
	to, err := mailbox(OneLine(no.OwnerEmail))
	if err != nil {
		return Email{}, fmt.Errorf("%w: invalid owner address: %v", errUndeliverable, err)
	}
	to.Name = OneLine(no.OwnerName)
	recipient := OneLine(no.RecipientName)
	if recipient == "" {
		recipient = OneLine(no.RecipientEmail)
	}
	l := catalog.Localizer(no.OwnerLanguage)
	v := notifyView{OwnerName: to.Name, Recipient: recipient, Title: OneLine(no.Title),
		Link: publicURL + "/packages/" + no.PackageID, L: l}
	switch no.Kind {
	case NotifyDownloaded:
		v.Subject = l.T("mail.notify.downloaded", "Recipient", recipient, "Title", v.Title)
	case NotifyUploads:
		v.Subject = l.T("mail.notify.uploaded", "Recipient", recipient, "Count", len(no.Files), "Title", v.Title)
		for _, f := range no.Files {
			v.Files = append(v.Files, notifyFile{Name: OneLine(f.Name), Size: l.Size(f.Size)})
		}
	case NotifyInfected:
		v.Infected, v.Signature = OneLine(no.Filename), OneLine(no.Signature)
		v.Subject = l.T("mail.notify.infected_subject", "Title", v.Title, "File", v.Infected)
	default:
		return Email{}, msgerr.Poison(fmt.Errorf("unknown notification kind %q", no.Kind))
	}
	v.Subject = OneLine(v.Subject)
	var text, html bytes.Buffer
	if err := notifyText.Execute(&text, v); err != nil {
		return Email{}, fmt.Errorf("render notification text: %w", err)
	}
	if err := notifyHTML.Execute(&html, v); err != nil {
		return Email{}, fmt.Errorf("render notification html: %w", err)
	}
	return Email{
		JobID:      fmt.Sprintf("notify-%d-%s", no.ID, no.PackageID),
		To:         to,
		SenderName: "shipfile",
		Subject:    v.Subject,
		Text:       text.String(),
		HTML:       html.String(),
		Language:   l.Lang,
	}, nil
}
