package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

const (
	dashboardFile  = "grafana/shipfile.json"
	alertsFile     = "prometheus/alerts.yaml"
	operationsFile = "../docs/OPERATIONS.md"
)

// externalMetrics are the metrics the dashboard and the alerts may use that shipfile does
// not export: the NATS Helm chart's exporter (prometheus-nats-exporter -jsz=all
// -prefix=nats, deploy/nats/values.yaml) and ingress-nginx's controller.
var externalMetrics = map[string]bool{
	"nats_consumer_num_pending":                  true,
	"nats_consumer_num_ack_pending":              true,
	"nats_consumer_num_redelivered":              true,
	"nats_stream_total_messages":                 true,
	"nginx_ingress_controller_request_size_sum":  true,
	"nginx_ingress_controller_response_size_sum": true,
}

// promql parses PromQL as Prometheus does, without experimental features.
var promql = parser.NewParser(parser.Options{})

// grafanaVars replaces the dashboard's variables by values PromQL accepts.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "${__rate_interval}", "5m")

// exprMetrics parses expr as PromQL and returns the metric names it selects.
func exprMetrics(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := promql.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
	return names
}

// checkMetric fails when name is neither a metric of the code (a histogram's name with
// _bucket, _sum or _count, a counter's with _total as registered) nor an allowed
// external one.
func checkMetric(t *testing.T, src *goSources, where, name string) {
	t.Helper()
	if name == "" {
		t.Errorf("%s: a selector without a metric name", where)
		return
	}
	if externalMetrics[name] {
		return
	}
	if _, ok := src.metrics[name]; ok {
		if src.metrics[name] == "histogram" {
			t.Errorf("%s: %s is a histogram: use %s_bucket, _sum or _count", where, name, name)
		}
		return
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && src.metrics[base] == "histogram" {
			return
		}
	}
	t.Errorf("%s: metric %s is exported by no service (../services, ../pkg) and is not a known external one", where, name)
}

// dashboard is the part of Grafana's dashboard model the test reads.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Targets []struct {
		Expr         string `json:"expr"`
		RefID        string `json:"refId"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// The Grafana dashboard parses, each query is PromQL over metrics that exist, and it
// shows what the issue asks for.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	src := sources(t)
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 || len(d.Panels) == 0 {
		t.Fatalf("dashboard uid %q, title %q, schemaVersion %d, %d panels", d.UID, d.Title, d.SchemaVersion, len(d.Panels))
	}
	if i := slices.IndexFunc(d.Templating.List, func(v struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Query string `json:"query"`
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}); i < 0 {
		t.Error("no Prometheus datasource variable named datasource")
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.Panels {
		where := "panel " + p.Title
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("%s: id %d missing or used twice", where, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", where, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("%s overlaps %s", where, other)
					x, y = g.X+g.W, g.Y+g.H
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: datasource %+v, want ${datasource}", where, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, tg := range p.Targets {
			for _, m := range exprMetrics(t, where, tg.Expr) {
				checkMetric(t, src, where, m)
				used[m] = true
			}
		}
	}
	// What the dashboard is for: request rate and latency, upload throughput, outbox lag,
	// consumer lag per stream, deliveries by outcome, e-mails sent and failed, expiry lag.
	for _, m := range []string{
		"shipfile_http_requests_total", "shipfile_http_request_duration_seconds_bucket",
		"nginx_ingress_controller_request_size_sum",
		"shipfile_outbox_oldest_pending_seconds", "nats_consumer_num_pending",
		"shipfile_webhook_deliveries_total", "shipfile_mailer_jobs_total", "shipfile_expiry_lag_seconds",
	} {
		if !used[m] {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
}

// ruleFile is a Prometheus rule file, strictly.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// The alert rules parse strictly, their expressions are PromQL over metrics that exist,
// and they cover outbox lag, failed deliveries and expiry lag.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	src := sources(t)
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := decodeStrict(j, &rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	names := map[string]bool{}
	byMetric := map[string][]string{}
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: no name or no rules", g.Name)
		}
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if r.Alert == "" || names[r.Alert] {
				t.Errorf("%s: empty or duplicate name", where)
			}
			names[r.Alert] = true
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" && s != "info" {
				t.Errorf("%s: severity %q, want info, warning or critical", where, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", where)
			}
			e, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if e.Type() != parser.ValueTypeVector {
				t.Errorf("%s: the expression is a %s, an alert needs a vector", where, e.Type())
			}
			for _, m := range exprMetrics(t, where, r.Expr) {
				checkMetric(t, src, where, m)
				byMetric[m] = append(byMetric[m], r.Alert)
			}
			if !strings.Contains(r.Annotations["description"], "OPERATIONS.md") {
				t.Errorf("%s: the description should point at the runbook in docs/OPERATIONS.md", where)
			}
		}
	}
	for _, m := range []string{"shipfile_outbox_oldest_pending_seconds", "shipfile_webhook_deliveries_total", "shipfile_expiry_lag_seconds"} {
		if len(byMetric[m]) == 0 {
			t.Errorf("no alert on %s", m)
		}
	}
}

var backticked = regexp.MustCompile("`(shipfile_[a-z0-9_]+)`")

// docs/OPERATIONS.md names every metric the services export, and no metric they do not.
func TestMetricsDocumented(t *testing.T) {
	t.Parallel()
	src := sources(t)
	b, err := os.ReadFile(operationsFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(string(b), -1) {
		doc[m[1]] = true
	}
	var missing []string
	for m := range src.metrics {
		if !doc[m] {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not document %v", operationsFile, missing)
	}
	for m := range doc {
		if _, ok := src.metrics[m]; !ok {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
			if src.metrics[base] != "histogram" {
				t.Errorf("%s documents %s, which no service exports", operationsFile, m)
			}
		}
	}
}
