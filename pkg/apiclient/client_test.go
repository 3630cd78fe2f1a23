package apiclient_test

import (
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestClientIsNotStale fails when proto/openapi.yaml and the generated client differ in
// their operations: run `make generate` (scripts/generate.sh) after changing the
// document's operations.
func TestClientIsNotStale(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[*apiclient.ClientWithResponses]()
	generated := map[string]bool{}
	for m := range typ.Methods() {
		// Name or, for a body the client takes as it is (multipart uploads), NameWithBody.
		if name, ok := strings.CutSuffix(m.Name, "WithResponse"); ok {
			generated[strings.TrimSuffix(name, "WithBody")] = true
		}
	}
	documented := map[string]bool{}
	for path, op := range servicetest.MustContract(t).Operations() {
		r := []rune(op.OperationID)
		r[0] = unicode.ToUpper(r[0])
		name := string(r)
		documented[name] = true
		if !generated[name] {
			t.Errorf("%s (operationId %s) has no %sWithResponse in pkg/apiclient: run `make generate`", path, op.OperationID, name)
		}
	}
	for name := range generated {
		if !documented[name] {
			t.Errorf("pkg/apiclient has %sWithResponse, which proto/openapi.yaml no longer documents: run `make generate`", name)
		}
	}
}
