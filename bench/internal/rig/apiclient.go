package rig

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/shipfile/shipfile/pkg/apiclient"
)

// The benchmarks set things up (users' packages, finalizing, webhooks) through the
// client generated from proto/openapi.yaml, so a change of the API's shapes breaks
// their build instead of a run. The measured loops (the api row's creates, the events
// row's finalizes, the transfer rows' uploads and downloads) keep Do, Upload and raw
// requests: they count every status and error body, and the generated client's
// decoding of each answer into typed fields would add work the baselines do not do.

// Gen returns the generated client of the API at c.Base over c's connection pool,
// sending c's token.
func (c *Client) Gen() *apiclient.ClientWithResponses {
	g, err := apiclient.NewClientWithResponses(c.Base,
		apiclient.WithHTTPClient(c.HTTP),
		apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			if c.Token != "" {
				req.Header.Set("Authorization", "Bearer "+c.Token)
			}
			return nil
		}))
	if err != nil {
		panic(fmt.Sprintf("rig: generated client of %q: %v", c.Base, err)) // only a malformed base URL
	}
	return g
}

// check turns an answer of a generated client's call into an error unless it is want.
func check(op string, status int, body []byte, want int) error {
	if status != want {
		return fmt.Errorf("%s: %d %.300s, want %d", op, status, body, want)
	}
	return nil
}

// PackageBody is the body of a package the benchmarks create (NewPackage, typed).
func PackageBody(title string) apiclient.CreatePackage {
	return PackageFor(title, "recipient@example.com", "Recipient")
}

// PackageFor is the body of a package titled title for the recipient email, name.
func PackageFor(title, email, name string) apiclient.CreatePackage {
	addr := openapi_types.Email(email)
	return apiclient.CreatePackage{Title: title, RecipientEmail: &addr, RecipientName: &name}
}

// CreatePackage creates a package.
func (c *Client) CreatePackage(ctx context.Context, body apiclient.CreatePackage) (apiclient.Package, error) {
	r, err := c.Gen().CreatePackageWithResponse(ctx, body)
	if err != nil {
		return apiclient.Package{}, fmt.Errorf("create package: %w", err)
	}
	if err := check("create package", r.StatusCode(), r.Body, http.StatusCreated); err != nil {
		return apiclient.Package{}, err
	}
	return *r.JSON201, nil
}

// Finalize finalizes package packageID and returns it with its magic link.
func (c *Client) Finalize(ctx context.Context, packageID string) (apiclient.FinalizedPackage, error) {
	id, err := uuid.Parse(packageID)
	if err != nil {
		return apiclient.FinalizedPackage{}, fmt.Errorf("finalize package %q: %w", packageID, err)
	}
	r, err := c.Gen().FinalizePackageWithResponse(ctx, id)
	if err != nil {
		return apiclient.FinalizedPackage{}, fmt.Errorf("finalize package: %w", err)
	}
	if err := check("finalize package", r.StatusCode(), r.Body, http.StatusOK); err != nil {
		return apiclient.FinalizedPackage{}, err
	}
	return *r.JSON200, nil
}

// Revoke revokes package packageID.
func (c *Client) Revoke(ctx context.Context, packageID string) error {
	id, err := uuid.Parse(packageID)
	if err != nil {
		return fmt.Errorf("revoke package %q: %w", packageID, err)
	}
	r, err := c.Gen().RevokePackageWithResponse(ctx, id)
	if err != nil {
		return fmt.Errorf("revoke package: %w", err)
	}
	return check("revoke package", r.StatusCode(), r.Body, http.StatusOK)
}

// DeletePackage deletes package packageID.
func (c *Client) DeletePackage(ctx context.Context, packageID string) error {
	id, err := uuid.Parse(packageID)
	if err != nil {
		return fmt.Errorf("delete package %q: %w", packageID, err)
	}
	r, err := c.Gen().DeletePackageWithResponse(ctx, id)
	if err != nil {
		return fmt.Errorf("delete package: %w", err)
	}
	return check("delete package", r.StatusCode(), r.Body, http.StatusNoContent)
}

// CreateWebhook creates a webhook subscription (c must be an admin's).
func (c *Client) CreateWebhook(ctx context.Context, body apiclient.CreateWebhook) (apiclient.CreatedWebhook, error) {
	r, err := c.Gen().CreateWebhookWithResponse(ctx, body)
	if err != nil {
		return apiclient.CreatedWebhook{}, fmt.Errorf("create webhook: %w", err)
	}
	if err := check("create webhook", r.StatusCode(), r.Body, http.StatusCreated); err != nil {
		return apiclient.CreatedWebhook{}, err
	}
	return *r.JSON201, nil
}

// Me returns the caller.
func (c *Client) Me(ctx context.Context) (apiclient.Me, error) {
	r, err := c.Gen().GetMeWithResponse(ctx)
	if err != nil {
		return apiclient.Me{}, fmt.Errorf("get me: %w", err)
	}
	if err := check("get me", r.StatusCode(), r.Body, http.StatusOK); err != nil {
		return apiclient.Me{}, err
	}
	return *r.JSON200, nil
}

// Webhook is the body of a subscription of url to events (every event when none).
func Webhook(url string, events ...string) apiclient.CreateWebhook {
	w := apiclient.CreateWebhook{Url: url}
	if len(events) > 0 {
		ts := make([]apiclient.EventType, len(events))
		for i, e := range events {
			ts[i] = apiclient.EventType(e)
		}
		w.Events = &ts
	}
	return w
}

// TB is what the Must helpers need of a test.
type TB interface {
	Helper()
	Fatalf(string, ...any)
}

// MustCreatePackage creates a package, failing t when it cannot.
func (c *Client) MustCreatePackage(t TB, body apiclient.CreatePackage) apiclient.Package {
	t.Helper()
	p, err := c.CreatePackage(context.Background(), body)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// MustFinalize finalizes package packageID, failing t when it cannot.
func (c *Client) MustFinalize(t TB, packageID string) apiclient.FinalizedPackage {
	t.Helper()
	p, err := c.Finalize(context.Background(), packageID)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// MustCreateWebhook creates a webhook subscription, failing t when it cannot.
func (c *Client) MustCreateWebhook(t TB, body apiclient.CreateWebhook) apiclient.CreatedWebhook {
	t.Helper()
	w, err := c.CreateWebhook(context.Background(), body)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return w
}
