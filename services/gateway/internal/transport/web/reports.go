package web

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
)

// dateLayout is how the activity page's date fields are written (an <input type=date>).
const dateLayout = "2006-01-02"

type activityData struct {
	From, To string // the range's first and last day, UTC
	Rows     []audit.Activity
	CSV      string // the same report as CSV, from the API
}

// activityPage is the admins' activity report: per user, packages and bytes sent,
// bytes received, downloads and recipients' domains over a range of days (UTC, both
// ends included; the 30 days to today by default).
func (w *Web) activityPage(c *gin.Context) {
	v := view{Title: "Activity report", Section: "audit"}
	if w.reports == nil {
		_ = c.Error(app.NotFound("page"))
		return
	}
	var from, to time.Time
	errs := map[string]string{}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		s := strings.TrimSpace(c.Query(f.name))
		if s == "" {
			continue
		}
		t, err := time.Parse(dateLayout, s)
		if err != nil {
			errs[f.name] = "Must be a date, e.g. 2027-01-31."
			continue
		}
		*f.dst = t
	}
	if !to.IsZero() {
		to = to.Add(24 * time.Hour) // the last day is included
	}
	if len(errs) > 0 {
		v.Errors = errs
		v.D = activityData{From: c.Query("from"), To: c.Query("to")}
		w.render(c, http.StatusUnprocessableEntity, "activity", v)
		return
	}
	rows, from, to, err := w.reports.Activity(c.Request.Context(), from, to)
	if err != nil {
		v.Error = err.Error()
		v.D = activityData{From: c.Query("from"), To: c.Query("to")}
		w.render(c, http.StatusUnprocessableEntity, "activity", v)
		return
	}
	q := url.Values{"format": {"csv"}, "from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
	v.D = activityData{From: from.Format(dateLayout), To: to.Add(-time.Nanosecond).Format(dateLayout), Rows: rows,
		CSV: "/api/v1/admin/reports/activity?" + q.Encode()}
	w.render(c, http.StatusOK, "activity", v)
}
