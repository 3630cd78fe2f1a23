package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// decodeJSON reads a JSON request body of at most maxBytes into dst. Every way the body
// can be wrong is an error with a message fit for the caller: 415 for another media
// type, 413 when too large, 422 for malformed JSON or a field of the wrong type.
func decodeJSON(c *gin.Context, maxBytes int64, dst any) error {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &httpError{status: http.StatusUnsupportedMediaType, detail: "Content-Type must be application/json"}
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxBytes))
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return app.Invalid("request body must hold a single JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var (
		mbe    *http.MaxBytesError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	var ae *app.Error
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.As(err, &ae):
		return ae // a field's own decoder said what is wrong
	case errors.Is(err, io.EOF):
		return app.Invalid("request body is empty; a JSON object is required")
	case errors.As(err, &syntax):
		return app.Invalid("malformed JSON at byte %d", syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return app.Invalid("malformed JSON: unexpected end of body")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return app.Invalid("request body must be a JSON object")
		}
		return app.Invalid("field %q must be %s", typ.Field, jsonTypeName(typ.Type.Kind().String()))
	default:
		var te *time.ParseError
		if errors.As(err, &te) {
			return app.Invalid("invalid date-time: %s", te.Value)
		}
		return app.Invalid("invalid request body: %v", err)
	}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	default:
		return "an object"
	}
}

// pathID parses the integer path parameter name; anything else means the resource
// cannot exist.
func pathID(c *gin.Context, name, what string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, app.NotFound(what)
	}
	return id, nil
}

// parseTime parses an optional RFC 3339 date-time field.
func parseTime(field string, s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return nil, app.Invalid("%s must be an RFC 3339 date-time, e.g. 2027-01-01T00:00:00Z", field)
	}
	return &t, nil
}

// required returns the value of a required string field.
func required(field string, s *string) (string, error) {
	if s == nil {
		return "", app.Invalid("%s is required", field)
	}
	return *s, nil
}
