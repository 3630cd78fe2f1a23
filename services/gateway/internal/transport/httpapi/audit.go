package httpapi

import (
	"bufio"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
)

// The audit chain's export, the legal holds and the activity report (docs/API.md,
// "Audit export", "Legal holds", "Activity report"), admin routes.

// exportAudit streams the chained entries written in [from, to) and those between
// them in the chain, one line each with its hash, as JSONL or CSV. Entries are read a
// page at a time and written as they come, so memory stays flat whatever the range.
func (h *handlers) exportAudit(c *gin.Context) {
	from, err := queryTime(c, "from")
	if err != nil {
		_ = c.Error(err)
		return
	}
	to, err := queryTime(c, "to")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		_ = c.Error(app.Invalid("from must be before to"))
		return
	}
	format := c.DefaultQuery("format", "jsonl")
	if format != "jsonl" && format != "csv" {
		_ = c.Error(app.Invalid("format must be jsonl or csv"))
		return
	}
	ctx := c.Request.Context()
	if err := h.audit.RecordExport(ctx, currentUser(c), client(c), from, to, format); err != nil {
		_ = c.Error(err)
		return
	}
	w := bufio.NewWriterSize(c.Writer, 64<<10)
	var write func(audit.Entry) error
	if format == "csv" {
		c.Header("Content-Type", "text/csv; charset=utf-8")
		cw := csv.NewWriter(w)
		_ = cw.Write(audit.CSVHeader)
		write = func(e audit.Entry) error {
			_ = cw.Write(audit.CSVRecord(e))
			cw.Flush()
			return cw.Error()
		}
	} else {
		c.Header("Content-Type", "application/x-ndjson")
		var line []byte
		write = func(e audit.Entry) error {
			line = audit.AppendJSONL(line[:0], e)
			_, err := w.Write(line)
			return err
		}
	}
	c.Header("Content-Disposition", `attachment; filename="audit.`+format+`"`)
	c.Status(http.StatusOK)
	err = h.audit.Export(ctx, from, to, write)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		// The status is sent: the client sees the stream end early, and an export cut
		// short still verifies only as far as it goes.
		h.log.Warn("audit export cut short", "err", err)
	}
}

// queryTime reads an optional RFC 3339 query parameter (zero when absent).
func queryTime(c *gin.Context, name string) (time.Time, error) {
	s := c.Query(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, app.Invalid("%s must be an RFC 3339 date-time, e.g. 2027-01-01T00:00:00Z", name)
	}
	return t, nil
}

// toAPIHold is a legal hold as the API shows it; timestamps are UTC.
func toAPIHold(h audit.Hold) api.Hold {
	return api.Hold{Id: h.ID, PackageId: h.PackageID, UserId: h.UserID, Reason: h.Reason, Active: h.ReleasedAt == nil,
		CreatedBy: h.CreatedBy, CreatedAt: h.CreatedAt.UTC(), ReleasedBy: h.ReleasedBy, ReleasedAt: utcPtr(h.ReleasedAt)}
}

func (h *handlers) createHold(c *gin.Context) {
	var req api.NewHold
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	hold, err := h.holds.Place(c.Request.Context(), currentUser(c), client(c), audit.NewHold{PackageID: req.PackageId, UserID: req.UserId, Reason: req.Reason})
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, toAPIHold(hold))
}

func (h *handlers) listHolds(c *gin.Context) {
	hs, err := h.holds.List(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	items := make([]api.Hold, len(hs))
	for i, x := range hs {
		items[i] = toAPIHold(x)
	}
	c.JSON(http.StatusOK, api.HoldList{Items: items})
}

func (h *handlers) releaseHold(c *gin.Context) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		_ = c.Error(app.NotFound("hold"))
		return
	}
	hold, err := h.holds.Release(c.Request.Context(), currentUser(c), client(c), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIHold(hold))
}

// activityReport answers the per-user activity in [from, to) as JSON, or as CSV with
// format=csv (the domains joined by spaces; a cell a spreadsheet would take for a
// formula is written as text, as in the usage list).
func (h *handlers) activityReport(c *gin.Context) {
	from, err := queryTime(c, "from")
	if err != nil {
		_ = c.Error(err)
		return
	}
	to, err := queryTime(c, "to")
	if err != nil {
		_ = c.Error(err)
		return
	}
	format := c.DefaultQuery("format", "json")
	if format != "json" && format != "csv" {
		_ = c.Error(app.Invalid("format must be json or csv"))
		return
	}
	rows, from, to, err := h.reports.Activity(c.Request.Context(), from, to)
	if err != nil {
		_ = c.Error(err)
		return
	}
	items := make([]api.ActivityRow, len(rows))
	for i, r := range rows {
		items[i] = api.ActivityRow{UserId: r.UserID, Email: r.Email, Name: r.Name, PackagesSent: r.PackagesSent, BytesSent: r.BytesSent,
			BytesReceived: r.BytesReceived, Downloads: r.Downloads, RecipientDomains: r.RecipientDomains}
		if items[i].RecipientDomains == nil {
			items[i].RecipientDomains = []string{}
		}
	}
	if format == "json" {
		c.JSON(http.StatusOK, api.ActivityReport{From: from, To: to, Items: items})
		return
	}
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Header("Content-Disposition", `attachment; filename="activity.csv"`)
	c.Status(http.StatusOK)
	w := csv.NewWriter(c.Writer)
	_ = w.Write([]string{"user_id", "email", "name", "packages_sent", "bytes_sent", "bytes_received", "downloads", "recipient_domains"})
	for _, it := range items {
		_ = w.Write([]string{strconv.FormatInt(it.UserId, 10), csvCell(it.Email), csvCell(it.Name), strconv.FormatInt(it.PackagesSent, 10),
			strconv.FormatInt(it.BytesSent, 10), strconv.FormatInt(it.BytesReceived, 10), strconv.FormatInt(it.Downloads, 10),
			csvCell(strings.Join(it.RecipientDomains, " "))})
	}
	w.Flush()
}
