package signing_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
)

type vector struct {
	Name              string `json:"name"`
	Secret            string `json:"secret"`
	PreviousSecret    string `json:"previous_secret"`
	DeliveryID        string `json:"delivery_id"`
	Timestamp         int64  `json:"timestamp"`
	Body              string `json:"body"`
	XServiceSignature string `json:"x_service_signature"`
	WebhookSignature  string `json:"webhook_signature"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("../../testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	return vs
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			body := []byte(v.Body)
			if got := signing.Service(v.Secret, body); got != v.XServiceSignature {
				t.Errorf("X-Service-Signature = %s, want %s", got, v.XServiceSignature)
			}
			if got := signing.StandardHeader(v.DeliveryID, v.Timestamp, body, v.Secret, v.PreviousSecret); got != v.WebhookSignature {
				t.Errorf("webhook-signature = %s, want %s", got, v.WebhookSignature)
			}
			if !signing.VerifyService(v.Secret, body, v.XServiceSignature) {
				t.Error("VerifyService refuses the vector")
			}
			if !signing.VerifyStandard(v.Secret, v.DeliveryID, v.Timestamp, body, v.WebhookSignature) {
				t.Error("VerifyStandard refuses the vector with the current secret")
			}
			if v.PreviousSecret != "" && !signing.VerifyStandard(v.PreviousSecret, v.DeliveryID, v.Timestamp, body, v.WebhookSignature) {
				t.Error("VerifyStandard refuses the vector with the previous secret")
			}
		})
	}
}

func TestVerifyServiceRefuses(t *testing.T) {
	v := loadVectors(t)[1]
	body := []byte(v.Body)
	hexDigest := strings.TrimPrefix(v.XServiceSignature, "sha256=")
	cases := map[string]struct {
		secret, body, header string
	}{
		"no sha256= prefix":     {v.Secret, v.Body, hexDigest},
		"other prefix":          {v.Secret, v.Body, "sha1=" + hexDigest},
		"upper-case prefix":     {v.Secret, v.Body, "SHA256=" + hexDigest},
		"empty":                 {v.Secret, v.Body, ""},
		"prefix only":           {v.Secret, v.Body, "sha256="},
		"not hex":               {v.Secret, v.Body, "sha256=zz" + hexDigest[2:]},
		"truncated":             {v.Secret, v.Body, v.XServiceSignature[:len(v.XServiceSignature)-2]},
		"other secret":          {v.Secret + "x", v.Body, v.XServiceSignature},
		"body changed":          {v.Secret, v.Body + " ", v.XServiceSignature},
		"key is the whole text": {strings.TrimPrefix(v.Secret, "whsec_"), v.Body, v.XServiceSignature},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if signing.VerifyService(c.secret, []byte(c.body), c.header) {
				t.Error("accepted")
			}
		})
	}
	if !signing.VerifyService(v.Secret, body, v.XServiceSignature) {
		t.Error("the genuine signature is refused")
	}
}

func TestVerifyStandardRefuses(t *testing.T) {
	v := loadVectors(t)[2]
	body := []byte(v.Body)
	for name, header := range map[string]string{
		"empty":            "",
		"no version":       strings.TrimPrefix(v.WebhookSignature, "v1,"),
		"other version":    strings.Replace(v.WebhookSignature, "v1,", "v2,", -1),
		"other timestamp":  signing.StandardHeader(v.DeliveryID, v.Timestamp+1, body, v.Secret),
		"other id":         signing.StandardHeader(v.DeliveryID+"x", v.Timestamp, body, v.Secret),
		"unrelated secret": signing.StandardHeader(v.DeliveryID, v.Timestamp, body, "whsec_c2VjcmV0"),
	} {
		t.Run(name, func(t *testing.T) {
			if signing.VerifyStandard(v.Secret, v.DeliveryID, v.Timestamp, body, header) {
				t.Error("accepted")
			}
		})
	}
}

// TestSignerMatchesFunctions: a Signer's signatures are those of Service and Standard,
// for every vector, a long id, and when used at once from many goroutines.
func TestSignerMatchesFunctions(t *testing.T) {
	for _, v := range loadVectors(t) {
		s := signing.NewSigner(v.Secret)
		for _, id := range []string{v.DeliveryID, strings.Repeat("x", 300)} {
			if got, want := s.Service([]byte(v.Body)), signing.Service(v.Secret, []byte(v.Body)); got != want {
				t.Errorf("%s: Service %s, want %s", v.Name, got, want)
			}
			if got, want := s.Standard(id, v.Timestamp, []byte(v.Body)), signing.Standard(v.Secret, id, v.Timestamp, []byte(v.Body)); got != want {
				t.Errorf("%s: Standard %s, want %s", v.Name, got, want)
			}
		}
	}
	v := loadVectors(t)[0]
	s := signing.NewSigner(v.Secret)
	want := signing.Standard(v.Secret, v.DeliveryID, v.Timestamp, []byte(v.Body))
	errs := make(chan string, 8)
	for range 8 {
		go func() {
			for range 200 {
				if got := s.Standard(v.DeliveryID, v.Timestamp, []byte(v.Body)); got != want {
					errs <- got
					return
				}
			}
			errs <- ""
		}()
	}
	for range 8 {
		if got := <-errs; got != "" {
			t.Fatalf("concurrent Standard %s, want %s", got, want)
		}
	}
}
