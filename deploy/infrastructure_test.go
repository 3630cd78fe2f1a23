package deploy_test

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// PostgreSQL: a CloudNativePG Cluster of three with synchronous replication, whose
// generated Secret the services use, archived by the Barman Cloud plugin into the
// ObjectStore, backed up nightly.
func TestPostgresCluster(t *testing.T) {
	t.Parallel()
	d := rendered(t, productionDir)
	c := d.get("Cluster", "shipfile-db").(*PGCluster)
	if c.Spec.Instances != 3 || c.Spec.PostgreSQL == nil || c.Spec.PostgreSQL.Synchronous == nil || c.Spec.PostgreSQL.Synchronous.Number < 1 {
		t.Errorf("Cluster: %d instances, postgresql %+v; want 3 with synchronous replication", c.Spec.Instances, c.Spec.PostgreSQL)
	}
	if m := c.Spec.PostgreSQL.Synchronous.Method; m != "any" && m != "first" {
		t.Errorf("synchronous method %q, want any or first", m)
	}
	if s := c.Spec.PrimaryUpdateStrategy; s != "unsupervised" && s != "supervised" {
		t.Errorf("primaryUpdateStrategy %q", s)
	}
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.InitDB == nil || c.Spec.Bootstrap.InitDB.Database != "shipfile" {
		t.Errorf("bootstrap %+v, want initdb of database shipfile", c.Spec.Bootstrap)
	}
	// CloudNativePG names the application Secret <cluster>-app; its key uri is a URL.
	appSecret := c.Name + "-app"
	for _, dep := range all[appsv1.Deployment](d) {
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "SHIPFILE_DATABASE_URL" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != appSecret || e.ValueFrom.SecretKeyRef.Key != "uri") {
				t.Errorf("Deployment %s takes SHIPFILE_DATABASE_URL from %+v, want %s/uri", dep.Name, e.ValueFrom, appSecret)
			}
		}
	}
	job := d.get("Job", "shipfile-migrate").(*batchv1.Job)
	if e := job.Spec.Template.Spec.Containers[0].Env[0]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != appSecret {
		t.Errorf("migration Job takes the database URL from %+v, want %s", e.ValueFrom, appSecret)
	}
	var archiver *PGPlugin
	for i, p := range c.Spec.Plugins {
		if p.IsWALArchiver != nil && *p.IsWALArchiver {
			archiver = &c.Spec.Plugins[i]
		}
	}
	if archiver == nil || archiver.Name != "barman-cloud.cloudnative-pg.io" {
		t.Fatalf("no Barman Cloud WAL archiver among the plugins %+v", c.Spec.Plugins)
	}
	storeName := archiver.Parameters["barmanObjectName"]
	store, ok := d.get("ObjectStore", storeName).(*ObjectStore)
	if !ok {
		t.Fatalf("the archiver names ObjectStore %q, which is not rendered", storeName)
	}
	if !strings.HasPrefix(store.Spec.Configuration.DestinationPath, "s3://") || store.Spec.RetentionPolicy == "" {
		t.Errorf("ObjectStore: destination %q, retention %q", store.Spec.Configuration.DestinationPath, store.Spec.RetentionPolicy)
	}
	if creds := store.Spec.Configuration.S3Credentials; creds == nil || creds.AccessKeyID == nil || creds.SecretAccessKey == nil {
		t.Error("ObjectStore: no S3 credentials reference")
	}
	sb := d.get("ScheduledBackup", "shipfile-db-nightly").(*ScheduledBackup)
	if sb.Spec.Cluster.Name != c.Name || sb.Spec.Method != "plugin" || sb.Spec.PluginConfiguration == nil || sb.Spec.PluginConfiguration.Name != archiver.Name {
		t.Errorf("ScheduledBackup %+v, want a plugin backup of %s", sb.Spec, c.Name)
	}
	if f := strings.Fields(sb.Spec.Schedule); len(f) != 6 {
		t.Errorf("schedule %q: CloudNativePG wants six fields, seconds first", sb.Spec.Schedule)
	}
}

// Every service that creates or updates the streams does so with SHIPFILE_STREAM_REPLICAS:
// one that did not would set them back to one replica at each of its starts.
func TestServicesEnsureStreamsWithReplicas(t *testing.T) {
	t.Parallel()
	src := sources(t)
	// Every service main connects through service.Open with its cfg.NATS, which calls
	// events.Connect, which creates the streams with SHIPFILE_STREAM_REPLICAS; a bare
	// bus.Connect or EnsureStreams could set them back.
	open, err := os.ReadFile("../pkg/service/connect.go")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`events\.Connect\(ctx, \*want\.NATS,`).Match(open) {
		t.Error("pkg/service.Open does not connect through events.Connect(ctx, *want.NATS, …)")
	}
	connected := map[string]bool{}
	for _, call := range src.natsStarts {
		file, expr, _ := strings.Cut(call, ": ")
		if strings.HasPrefix(expr, "service.Open(") && !strings.Contains(expr, "NATS:") {
			continue // a binary that opens no NATS connection (shipctl)
		}
		if !strings.HasPrefix(expr, "service.Open(") || !strings.Contains(expr, "NATS: &cfg.NATS") {
			t.Errorf("%s: %s; want service.Open(ctx, name, service.Connections{…, NATS: &cfg.NATS, …})", file, expr)
			continue
		}
		connected[filepath.Base(filepath.Dir(file))] = true
	}
	for _, svc := range []string{"gateway", "mailer", "expiry", "webhooks", "scanner"} {
		if !connected[svc] {
			t.Errorf("services/%s's main does not call service.Open with NATS: &cfg.NATS", svc)
		}
	}
}

// deploy/nats/values.yaml: three servers, JetStream on file storage, sync_interval
// always, monitoring on 8222 (KEDA's endpoint), the Prometheus exporter on.
func TestNATSHelmValues(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("nats/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool `json:"enabled"`
				Replicas int  `json:"replicas"`
			} `json:"cluster"`
			JetStream struct {
				Enabled   bool `json:"enabled"`
				FileStore struct {
					Enabled bool   `json:"enabled"`
					Dir     string `json:"dir"`
					PVC     struct {
						Enabled bool   `json:"enabled"`
						Size    string `json:"size"`
					} `json:"pvc"`
				} `json:"fileStore"`
				Merge map[string]any `json:"merge"`
			} `json:"jetstream"`
			Monitor struct {
				Enabled bool `json:"enabled"`
				Port    int  `json:"port"`
			} `json:"monitor"`
		} `json:"config"`
		PromExporter struct {
			Enabled bool `json:"enabled"`
		} `json:"promExporter"`
	}
	if err := yaml.Unmarshal(j, &v); err != nil {
		t.Fatal(err)
	}
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 {
		t.Errorf("cluster %+v, want 3 replicas", c.Cluster)
	}
	if !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled || !c.JetStream.FileStore.PVC.Enabled || c.JetStream.FileStore.PVC.Size == "" {
		t.Errorf("jetstream %+v, want file storage on a volume", c.JetStream)
	}
	if c.JetStream.Merge["sync_interval"] != "always" {
		t.Errorf("jetstream sync_interval = %v, want always", c.JetStream.Merge["sync_interval"])
	}
	if !c.Monitor.Enabled || c.Monitor.Port != 8222 || !v.PromExporter.Enabled {
		t.Errorf("monitor %+v, exporter %v; want 8222 and the exporter", c.Monitor, v.PromExporter.Enabled)
	}
}

// TestScannerReachesClamav: in the base and every overlay the scanner's
// SHIPFILE_CLAMD_ADDR (its own env or the ConfigMap; the code's default, 127.0.0.1:3310,
// is nothing in a pod) names the clamav Service and one of its ports, and that Service
// selects the clamav StatefulSet, which runs ClamAV's own image (freshclam inside).
func TestScannerReachesClamav(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			cm := d.get("ConfigMap", "shipfile").(*corev1.ConfigMap)
			dep := d.get("Deployment", "scanner").(*appsv1.Deployment)
			addr, ok := envOf(dep.Spec.Template.Spec.Containers[0])["SHIPFILE_CLAMD_ADDR"]
			if !ok {
				addr = cm.Data["SHIPFILE_CLAMD_ADDR"]
			}
			host, port, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
			if err != nil {
				t.Fatalf("scanner: SHIPFILE_CLAMD_ADDR %q, want the clamav Service's host:port (%v)", addr, err)
			}
			svc, _ := d.get("Service", "clamav").(*corev1.Service)
			if svc == nil {
				t.Fatal("no Service/clamav")
			}
			if first, _, _ := strings.Cut(host, "."); first != svc.Name ||
				(host != svc.Name && !strings.HasPrefix(host, svc.Name+"."+svc.Namespace+".")) {
				t.Errorf("scanner: SHIPFILE_CLAMD_ADDR host %q is not the Service %s/%s", host, svc.Namespace, svc.Name)
			}
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port }) {
				t.Errorf("scanner: SHIPFILE_CLAMD_ADDR port %s is not a port of Service/clamav (%v)", port, svc.Spec.Ports)
			}
			sts := d.get("StatefulSet", "clamav").(*appsv1.StatefulSet)
			if sel := labels.SelectorFromSet(svc.Spec.Selector); len(svc.Spec.Selector) == 0 || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
				t.Errorf("Service/clamav selector %v does not select the clamav pods %v", svc.Spec.Selector, sts.Spec.Template.Labels)
			}
			if img := sts.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "clamav/clamav:") {
				t.Errorf("clamav runs %q, want ClamAV's own image (clamav/clamav, with freshclam)", img)
			}
			if cm.Data["SHIPFILE_SCAN"] != "block" {
				t.Errorf("ConfigMap: SHIPFILE_SCAN = %q, want block", cm.Data["SHIPFILE_SCAN"])
			}
		})
	}
}
