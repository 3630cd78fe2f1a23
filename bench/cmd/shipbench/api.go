package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// baselineCommand is the hidden sub-command that serves the API row's baseline.
const baselineCommand = "baseline-api"

// apiRow: POST /api/v1/packages from -api-clients concurrent clients for -api-duration,
// against a bare gin handler (this program run as `shipbench baseline-api`, a process of
// its own like the gateway) that decodes the same body and does one pgx INSERT of the
// same row into the same packages table of the same database, with the same pool
// settings. The same client drives both, one after the other.
func apiRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report) {
	nats := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: nats.URL})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	me := s.API.Must(t, "GET", "/api/v1/me", nil, http.StatusOK)
	owner := strconv.FormatInt(int64(me.JSON["id"].(float64)), 10)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := servicetest.FreeAddr(t)
	base := rig.NewProc(t, "baseline-api", addr, self, []string{baselineCommand, "-addr", addr, "-db", s.DBURL, "-owner", owner}, nil)
	base.Start()
	base.WaitReady(30 * time.Second)

	half := c.apiDuration
	if need := 2*half + 5*time.Second; time.Until(deadlineOf(ctx)) < need {
		rep.Add(Row{What: "API", Verdict: "not run (budget too short for -api-duration)"})
		return
	}
	cpu, procCPU := rig.ReadCPU(), rig.ProcCPU(base.Pid())
	b := load(ctx, rig.NewClient(base.URL(""), s.Token), c.apiClients, half)
	rep.Rawf("API baseline (gin + one pgx INSERT): %s; machine CPU %.0f%% busy, the baseline process used %s of CPU (%.2f ms a request)",
		b, 100*cpu.BusySince(), (rig.ProcCPU(base.Pid()) - procCPU).Round(10*time.Millisecond), perRequest(rig.ProcCPU(base.Pid())-procCPU, b.ok))
	prof.record(ctx, s.Gateway, half-time.Second, "api-gateway")
	cpu, procCPU = rig.ReadCPU(), rig.ProcCPU(s.Gateway.Pid())
	g := load(ctx, s.API, c.apiClients, half)
	rep.Rawf("API gateway POST /api/v1/packages: %s; machine CPU %.0f%% busy, the gateway used %s of CPU (%.2f ms a request)",
		g, 100*cpu.BusySince(), (rig.ProcCPU(s.Gateway.Pid()) - procCPU).Round(10*time.Millisecond), perRequest(rig.ProcCPU(s.Gateway.Pid())-procCPU, g.ok))
	if g.ok == 0 || b.ok == 0 {
		t.Fatalf("no request succeeded (gateway %s; baseline %s)", g, b)
	}
	rep.Add(Row{
		What:     fmt.Sprintf("API: POST /api/v1/packages, %d clients, %s", c.apiClients, half),
		Measured: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s", g.rps(), rig.Ms(g.p50), rig.Ms(g.p99)),
		Baseline: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s (gin + pgx INSERT)", b.rps(), rig.Ms(b.p50), rig.Ms(b.p99)),
		Ratio:    ratio(g.rps(), b.rps()),
		Target:   "≥ 0.70× req/s; p99 reported",
		Verdict:  verdict(g.rps() >= 0.7*b.rps() && g.failed == 0, "%.0f%% below 0.70×, %d failed requests", max(0, (0.7-g.rps()/b.rps())/0.7*100), g.failed),
	})
}

// loadResult sums up a closed-loop load run.
type loadResult struct {
	ok, failed int
	statuses   map[int]int
	elapsed    time.Duration
	p50, p99   time.Duration
}

func (r loadResult) rps() float64 { return float64(r.ok) / r.elapsed.Seconds() }

func (r loadResult) String() string {
	return fmt.Sprintf("%d requests answered 201 and %d not (statuses %v) in %s: %.0f req/s, p50 %s, p99 %s",
		r.ok, r.failed, r.statuses, r.elapsed.Round(time.Millisecond), r.rps(), rig.Ms(r.p50), rig.Ms(r.p99))
}

// load runs clients goroutines, each sending POST /api/v1/packages one after the
// other, for d; latencies are those of 201 answers.
func load(ctx context.Context, client *rig.Client, clients int, d time.Duration) loadResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	res := loadResult{statuses: map[int]int{}}
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			var mine []time.Duration
			statuses := map[int]int{}
			body := rig.NewPackage("bench api " + strconv.Itoa(i))
			for ctx.Err() == nil {
				t0 := time.Now()
				a, err := client.Do(ctx, "POST", "/api/v1/packages", body)
				if ctx.Err() != nil {
					break // cut off by the end of the run: not counted
				}
				if err != nil {
					statuses[-1]++
					continue
				}
				statuses[a.Status]++
				if a.Status == http.StatusCreated {
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			for s, n := range statuses {
				res.statuses[s] += n
				if s == http.StatusCreated {
					res.ok += n
				} else {
					res.failed += n
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.p50, res.p99 = rig.Percentile(lat, 50), rig.Percentile(lat, 99)
	return res
}

func perRequest(cpu time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(cpu) / float64(time.Millisecond) / float64(n)
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Hour)
}

// serveBaseline is `shipbench baseline-api -addr A -db URL -owner ID`: POST
// /api/v1/packages decodes the JSON body and inserts one draft package row, nothing
// else (no token check, no outbox row, no audit entry); /readyz answers 200.
func serveBaseline(args []string) error {
	fs := flag.NewFlagSet(baselineCommand, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	db := fs.String("db", "", "database URL")
	owner := fs.Int64("owner", 0, "owner_user_id of the rows")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := database.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer pool.Close()

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/readyz", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.POST("/api/v1/packages", func(c *gin.Context) {
		var req struct {
			Title          string `json:"title"`
			RecipientEmail string `json:"recipient_email"`
			RecipientName  string `json:"recipient_name"`
		}
		if err := json.NewDecoder(c.Request.Body).Decode(&req); err != nil {
			c.JSON(http.StatusUnprocessableEntity, gin.H{"detail": err.Error()})
			return
		}
		id, _ := uuid.NewV7()
		now := time.Now().UTC()
		_, err := pool.Exec(c.Request.Context(), `INSERT INTO packages
			(id, owner_user_id, title, recipient_email, recipient_name, direction, state, ttl_days, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, 'outbound', 'draft', 7, $6, $7)`,
			id, *owner, req.Title, req.RecipientEmail, req.RecipientName, now, now.Add(7*24*time.Hour))
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"detail": err.Error()})
			return
		}
		c.JSON(http.StatusCreated, gin.H{"id": id.String(), "title": req.Title, "recipient_email": req.RecipientEmail,
			"recipient_name": req.RecipientName, "direction": "outbound", "state": "draft", "ttl_days": 7,
			"created_at": now, "expires_at": now.Add(7 * 24 * time.Hour)})
	})
	srv := &http.Server{Addr: *addr, Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
