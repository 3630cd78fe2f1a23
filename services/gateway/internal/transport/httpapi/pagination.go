package httpapi

import (
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Page sizes of lists.
const (
	defaultPageSize = 20
	maxPageSize     = 100
)

func pageLimit(c *gin.Context) (int, error) {
	raw, ok := c.GetQuery("limit")
	if !ok {
		return defaultPageSize, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > maxPageSize {
		return 0, app.Invalid("limit must be an integer from 1 to %d", maxPageSize)
	}
	return n, nil
}

// idCursor parses the cursor of a list ordered by descending integer id: the id the
// page starts below, 0 for the first page.
func idCursor(c *gin.Context) (int64, error) {
	cur := c.Query("cursor")
	if cur == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(cur, 10, 64)
	if err != nil || n <= 0 {
		return 0, app.Invalid("cursor is not one this API handed out")
	}
	return n, nil
}

// page trims a list fetched with one item more than limit to the page, and returns the
// cursor of the next page, nil on the last one.
func page[T any](items []T, limit int, cursorOf func(last T) string) ([]T, *string) {
	if len(items) <= limit {
		return items, nil
	}
	items = items[:limit]
	cur := cursorOf(items[limit-1])
	return items, &cur
}
