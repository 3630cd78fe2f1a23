package audit

import (
	"context"
	"slices"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// MaxReportRange bounds the range of an activity report.
const MaxReportRange = 366 * 24 * time.Hour

// DefaultReportRange is the range of a report asked without from: the last 30 days.
const DefaultReportRange = 30 * 24 * time.Hour

// Activity is one user's activity in a report's range.
type Activity struct {
	UserID           int64
	Email, Name      string
	PackagesSent     int64
	BytesSent        int64
	BytesReceived    int64
	Downloads        int64
	RecipientDomains []string
}

// ReportStore reads the activity of every user in [from, to).
type ReportStore interface {
	ActivityReport(ctx context.Context, from, to time.Time) ([]Activity, error)
}

// Reports makes the admins' reports.
type Reports struct {
	store ReportStore
	now   func() time.Time
}

// NewReports returns the reports read from store.
func NewReports(store ReportStore) *Reports { return &Reports{store: store, now: time.Now} }

// ReportRange settles a report's range: to defaults to now, from to DefaultReportRange
// before to; from must come before to, at most MaxReportRange apart.
func ReportRange(from, to, now time.Time) (time.Time, time.Time, error) {
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		from = to.Add(-DefaultReportRange)
	}
	if !from.Before(to) {
		return from, to, app.Invalid("from must be before to")
	}
	if to.Sub(from) > MaxReportRange {
		return from, to, app.Invalid("the range may span at most 366 days")
	}
	return from.UTC(), to.UTC(), nil
}

// Activity is every user's activity in [from, to) (zero: the defaults of ReportRange),
// users by e-mail, each one's domains sorted; it returns the range it covers.
func (r *Reports) Activity(ctx context.Context, from, to time.Time) ([]Activity, time.Time, time.Time, error) {
	from, to, err := ReportRange(from, to, r.now())
	if err != nil {
		return nil, from, to, err
	}
	rows, err := r.store.ActivityReport(ctx, from, to)
	for i := range rows {
		slices.Sort(rows[i].RecipientDomains)
	}
	return rows, from, to, err
}
