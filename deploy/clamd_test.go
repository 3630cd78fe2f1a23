package deploy_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// clamdAlerts are the clamd.conf options without which clamd answers OK for what it did
// not scan (over a limit, encrypted, a broken executable): every shipped clamd sets
// them, so that the scanner records such a file 'unscannable' (docs/SCANNING.md, "Malware
// scanning").
var clamdAlerts = []string{"AlertExceedsMax", "AlertEncrypted", "AlertEncryptedArchive", "AlertEncryptedDoc", "AlertBrokenExecutables"}

// TestShippedClamdFailsClosed: docker-compose.yml's clamav, the clamav StatefulSet of
// the base and every overlay (ClamAV's image reads CLAMD_CONF_<option>) and the
// clamd.conf scripts/dev.sh writes for make up and make test set every Alert* option.
func TestShippedClamdFailsClosed(t *testing.T) {
	t.Parallel()
	t.Run("docker-compose.yml", func(t *testing.T) {
		env := readCompose(t).Services["clamav"].Environment
		for _, o := range clamdAlerts {
			if v, ok := env["CLAMD_CONF_"+o]; !ok || fmt.Sprint(v) != "yes" {
				t.Errorf("clamav: CLAMD_CONF_%s = %v, want yes", o, v)
			}
		}
	})
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			sts := rendered(t, dir).get("StatefulSet", "clamav").(*appsv1.StatefulSet)
			env := envOf(sts.Spec.Template.Spec.Containers[0])
			for _, o := range clamdAlerts {
				if v := env["CLAMD_CONF_"+o]; v != "yes" {
					t.Errorf("clamav: CLAMD_CONF_%s = %q, want yes", o, v)
				}
			}
		})
	}
	t.Run("scripts/dev.sh", func(t *testing.T) {
		// The function that writes the clamd.conf, run on its own.
		out, err := exec.Command("bash", "-c",
			`eval "$(sed -n '/^clamd_conf() {/,/^}/p' ../scripts/dev.sh)" && CLAMD_PORT=3310 clamd_conf /tmp/clamd`).Output()
		if err != nil || !strings.Contains(string(out), "DatabaseDirectory") {
			t.Fatalf("clamd_conf of scripts/dev.sh: %v\n%s", err, out)
		}
		set := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && !strings.HasPrefix(k, "#") {
				set[k] = v
			}
		}
		for _, o := range clamdAlerts {
			if set[o] != "yes" {
				t.Errorf("clamd.conf: %s = %q, want yes", o, set[o])
			}
		}
	})
}
