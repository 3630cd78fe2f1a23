package servicetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/proto"
)

// APIPrefix starts every path of the REST API; an answer to a request under it must be
// documented by proto/openapi.yaml.
const APIPrefix = "/api/v1/"

// Contract is the REST API's OpenAPI document (proto/openapi.yaml), ready to check the
// answers a test receives with kin-openapi's openapi3filter: the status must be one the
// operation documents (or the 429/503 any endpoint may give), the documented headers
// must match their schemas, and a body must be of a documented content type and match
// its schema, formats (date-time, uuid, email, …) included. Objects are held strictly:
// a property the schema does not name is an error too, so a field that appears,
// disappears or changes type in an answer fails the test that received it.
type Contract struct {
	doc    *openapi3.T
	router routers.Router
}

func init() {
	// The documentation pages (/api/v1/docs, /api/v1/redoc) are text/html documented as a
	// string; kin-openapi decodes only text/plain as one out of the box.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	// The audit export streams JSONL and CSV, documented as strings.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/csv", openapi3filter.PlainBodyDecoder)
}

// LoadContract parses proto/openapi.yaml once per test binary.
var LoadContract = sync.OnceValues(func() (*Contract, error) { return NewContract(proto.OpenAPI) })

// NewContract parses an OpenAPI 3 document (YAML or JSON) into a Contract.
func NewContract(spec []byte) (*Contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("servicetest: load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("servicetest: the OpenAPI document is invalid: %w", err)
	}
	// The servers entry is relative ("/"): match any host the test server listens on.
	doc.Servers = nil
	strict(doc)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("servicetest: route the OpenAPI document: %w", err)
	}
	return &Contract{doc: doc, router: router}, nil
}

// MustContract is LoadContract that fails the test on an error.
func MustContract(t testing.TB) *Contract {
	t.Helper()
	c, err := LoadContract()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// strict makes every object schema with properties and no additionalProperties of its
// own refuse properties it does not name (for validation only: the document served to
// clients is proto/openapi.yaml as it is). allOf compositions are flattened first.
func strict(doc *openapi3.T) {
	var all []*openapi3.Schema
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		all = append(all, s)
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		for _, l := range [][]*openapi3.SchemaRef{s.AllOf, s.AnyOf, s.OneOf} {
			for _, r := range l {
				walk(r)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, r := range doc.Components.Responses {
		if r.Value != nil {
			for _, mt := range r.Value.Content {
				walk(mt.Schema)
			}
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				if r.Value != nil {
					for _, mt := range r.Value.Content {
						walk(mt.Schema)
					}
				}
			}
		}
	}
	for _, s := range all {
		flattenAllOf(s)
	}
	for _, s := range all {
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil &&
			len(s.AllOf)+len(s.AnyOf)+len(s.OneOf) == 0 {
			no := false
			s.AdditionalProperties.Has = &no
		}
	}
}

// flattenAllOf turns an allOf of object schemas (PackageDetail: Package and files) into
// one object schema with the properties and required names of them all, so that it can
// be held strictly as a whole; closing each member alone would refuse the properties of
// the others. An allOf with anything else in it is left as it is.
func flattenAllOf(s *openapi3.Schema) {
	if len(s.AllOf) == 0 || len(s.Properties) > 0 {
		return
	}
	props := openapi3.Schemas{}
	var required []string
	for _, m := range s.AllOf {
		if m == nil || m.Value == nil || len(m.Value.AllOf)+len(m.Value.AnyOf)+len(m.Value.OneOf) > 0 ||
			m.Value.AdditionalProperties.Has != nil || m.Value.AdditionalProperties.Schema != nil {
			return
		}
		for name, p := range m.Value.Properties {
			props[name] = p
		}
		required = append(required, m.Value.Required...)
	}
	s.AllOf = nil
	s.Type = &openapi3.Types{openapi3.TypeObject}
	s.Properties = props
	s.Required = required
}

// anyEndpoint are the statuses info.description says every endpoint may answer without
// listing them on each: 429 (rate limit) and 503 (a dependency is down), both with
// Retry-After and an Error body.
var anyEndpoint = map[int]bool{http.StatusTooManyRequests: true, http.StatusServiceUnavailable: true}

// undocumented are the statuses of an answer to a path or a method that no operation
// documents (info.description): not found, method not allowed, with an Error body.
var undocumented = map[int]bool{http.StatusNotFound: true, http.StatusMethodNotAllowed: true}

// Check validates one answer to req (status, header, body) against the document. A
// request outside APIPrefix is not the REST API's and passes; one under it that no
// operation documents must be answered 404 or 405 with an Error body.
func (c *Contract) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if !strings.HasPrefix(req.URL.Path, APIPrefix) {
		return nil
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil && undocumented[status] {
		// A path or a method no operation has: info.description's 404 or 405, an Error.
		return c.checkError(body)
	}
	if err != nil {
		return fmt.Errorf("%s %s is not an operation of proto/openapi.yaml: %w", req.Method, req.URL.Path, err)
	}
	if status == http.StatusRequestTimeout && route.Operation.RequestBody != nil &&
		route.Operation.Responses.Status(status) == nil {
		// info.description: any endpoint that takes a body may cut off one that comes
		// too slowly, with an Error.
		return c.checkError(body)
	}
	if anyEndpoint[status] && route.Operation.Responses.Status(status) == nil {
		if header.Get("Retry-After") == "" {
			return fmt.Errorf("%s %s: %d without Retry-After", req.Method, req.URL.Path, status)
		}
		return c.checkError(body)
	}
	// A file's bytes come with the file's own Content-Type (text/plain, image/png, …),
	// documented as a binary body: the status and the headers are checked, not the body.
	binary := !isJSON(header.Get("Content-Type")) && documentsBinary(route.Operation, status)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: status,
		Header: header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus:   true,
			ExcludeResponseBody:     binary,
			MultiError:              true,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()},
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s (operation %s): answer %d does not match proto/openapi.yaml: %w",
			req.Method, req.URL.Path, route.Operation.OperationID, status, err)
	}
	return nil
}

// isJSON reports whether a Content-Type is JSON (application/json, application/problem+json).
func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// documentsBinary reports whether op's answer with status has a body of binary string
// schema (a file download) in some media type.
func documentsBinary(op *openapi3.Operation, status int) bool {
	r := op.Responses.Status(status)
	if r == nil || r.Value == nil {
		return false
	}
	for _, mt := range r.Value.Content {
		if mt.Schema != nil && mt.Schema.Value != nil && mt.Schema.Value.Format == "binary" {
			return true
		}
	}
	return false
}

// checkError validates body against components.schemas.Error.
func (c *Contract) checkError(body []byte) error {
	ref := c.doc.Components.Schemas["Error"]
	if ref == nil {
		return errors.New("proto/openapi.yaml has no components.schemas.Error")
	}
	v, err := decodeJSON(body)
	if err != nil {
		return err
	}
	return ref.Value.VisitJSON(v, openapi3.VisitAsResponse())
}

// Transport returns an http.RoundTripper that sends each request through base
// (http.DefaultTransport when nil) and checks each answer with Check, failing t (Errorf,
// so the test goes on and shows what else drifts) when it does not match. The answer's
// body is read in full and handed on unchanged.
func (c *Contract) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &validating{t: t, c: c, base: base}
}

// validating is the RoundTripper of Contract.Transport.
type validating struct {
	t    testing.TB
	c    *Contract
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (v *validating) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.base.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, APIPrefix) {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("servicetest: read the answer to %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := v.c.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		v.t.Errorf("contract: %v\nanswer: %.500s", err, body)
	}
	return resp, nil
}

// HTTPClient returns an http.Client whose every answer from the REST API is checked
// against proto/openapi.yaml (see Contract.Transport); the test fails when the document
// cannot be loaded.
func HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	return &http.Client{Transport: MustContract(t).Transport(t, nil)}
}

func decodeJSON(b []byte) (any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	return v, nil
}

// Operations returns every operation of the document by "METHOD path".
func (c *Contract) Operations() map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}

// APIClient returns the generated REST API client (pkg/apiclient) for the server at
// base (http://127.0.0.1:8080), sending "Authorization: Bearer <token>" when token is
// not empty; every answer goes through HTTPClient's checks against proto/openapi.yaml.
func APIClient(t testing.TB, base, token string) *apiclient.ClientWithResponses {
	t.Helper()
	opts := []apiclient.ClientOption{apiclient.WithHTTPClient(HTTPClient(t))}
	if token != "" {
		opts = append(opts, apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	}
	c, err := apiclient.NewClientWithResponses(base, opts...)
	if err != nil {
		t.Fatalf("servicetest: API client for %s: %v", base, err)
	}
	return c
}
