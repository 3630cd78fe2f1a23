package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

var (
	listAll    = minio.ListObjectsOptions{Recursive: true}
	removeOpts = minio.RemoveObjectOptions{}
)

// TestCrashBetweenCommitAndPublish kills the gateway (SIGKILL) after a change is
// committed but before its event is published: the NATS server is frozen (SIGSTOP), so
// the publish cannot complete. After a restart the event is in the stream exactly once,
// whether or not the frozen server had taken the first attempt.
func TestCrashBetweenCommitAndPublish(t *testing.T) {
	natsCmd, natsURL := servicetest.StartNATS(t)
	e := newEnv(t, natsURL)
	gw := startGateway(t, e.vars)

	if err := natsCmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	api := servicetest.APIClient(t, gw.url(""), e.token)
	recipient := openapi_types.Email("r@example.com")
	created, err := api.CreatePackageWithResponse(t.Context(), apiclient.CreatePackageJSONRequestBody{Title: "Crash", RecipientEmail: &recipient})
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create: %v %v", err, created)
	}
	pkgID := created.JSON201.Id.String()

	ctx := context.Background()
	db, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var msgID string
	var published bool
	if err := db.QueryRow(ctx, `SELECT msg_id, published_at IS NOT NULL FROM outbox WHERE subject = $1`,
		events.Subject(events.TypePackageCreated)).Scan(&msgID, &published); err != nil {
		t.Fatal(err)
	}
	if published {
		t.Fatal("the event was published while NATS was frozen")
	}

	gw.kill()
	if err := natsCmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	startGateway(t, e.vars)
	servicetest.WaitFor(t, 30*time.Second, "the outbox row to be published (and deleted)", func() bool {
		var left int
		err := db.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE msg_id = $1`, msgID).Scan(&left)
		return err == nil && left == 0
	})

	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want exactly 1", info.State.Msgs)
	}
	msg, err := stream.GetMsg(ctx, info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get("Nats-Msg-Id"); got != msgID {
		t.Fatalf("Nats-Msg-Id = %q, want %q", got, msgID)
	}
	env, err := events.UnmarshalEnvelope(msg.Data)
	if err != nil || env.GetPackageCreated().GetPackage().GetPackageId() != pkgID {
		t.Fatalf("event = %v, %v", env, err)
	}
}
