package deploy_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestPodSecurity judges every pod template as the API server's Pod Security admission
// does (k8s.io/pod-security-admission): the kustomize Namespace's enforced level admits
// every pod of the base and of the production overlay, so none is refused at creation;
// shipfile's own pods meet restricted; the chart's pods meet what deploy/README.md
// says, restricted for shipfile's and baseline for ClamAV's.
func TestPodSecurity(t *testing.T) {
	t.Parallel()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	admit := func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, level api.Level) {
		t.Helper()
		res := policy.AggregateCheckResults(eval.EvaluatePod(api.LevelVersion{Level: level, Version: api.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec))
		if !res.Allowed {
			t.Errorf("%s: refused by the %q Pod Security Standard: %s", name, level, res.ForbiddenDetail())
		}
	}
	for _, dir := range []string{baseDir, productionDir} {
		t.Run(dir, func(t *testing.T) {
			d := rendered(t, dir)
			nss := all[corev1.Namespace](d)
			if len(nss) != 1 {
				t.Fatalf("%d Namespaces, want 1", len(nss))
			}
			enforce, err := api.ParseLevel(nss[0].Labels[api.EnforceLevelLabel])
			if err != nil {
				t.Fatalf("Namespace %s: %s: %v", nss[0].Name, api.EnforceLevelLabel, err)
			}
			if warn := nss[0].Labels[api.WarnLevelLabel]; warn != string(api.LevelRestricted) {
				t.Errorf("Namespace %s: %s = %q, want restricted (shipfile's pods meet it; a change that breaks that is told)", nss[0].Name, api.WarnLevelLabel, warn)
			}
			templates := podTemplates(d)
			if len(templates) == 0 {
				t.Fatal("no pod templates")
			}
			for name, tmpl := range templates {
				admit(t, name, tmpl, enforce)
				if !isClamAV(name) {
					admit(t, name, tmpl, api.LevelRestricted)
				}
			}
		})
	}
	t.Run("chart", func(t *testing.T) {
		objs, err := renderChart(chartValues(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		for name, tmpl := range podTemplates(decodeAll(t, objs)) {
			if isClamAV(name) {
				admit(t, name, tmpl, api.LevelBaseline)
			} else {
				admit(t, name, tmpl, api.LevelRestricted)
			}
		}
	})
}

func isClamAV(name string) bool { return strings.HasSuffix(name, "/clamav") }

// podTemplates returns the pod template of every workload, by "Kind/name".
func podTemplates(d decoded) map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for _, x := range all[appsv1.Deployment](d) {
		out["Deployment/"+x.Name] = x.Spec.Template
	}
	for _, x := range all[appsv1.StatefulSet](d) {
		out["StatefulSet/"+x.Name] = x.Spec.Template
	}
	for _, x := range all[batchv1.Job](d) {
		out["Job/"+x.Name] = x.Spec.Template
	}
	return out
}
