package deploy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The kustomizations `make k8s` and the tests render.
const (
	baseDir       = "k8s/base"
	productionDir = "k8s/overlays/production"
)

// object is one rendered manifest.
type object struct {
	APIVersion, Kind, Name string
	JSON                   []byte
}

func (o object) key() string { return o.APIVersion + "/" + o.Kind }

func (o object) String() string { return o.Kind + "/" + o.Name }

// renderDir runs kustomize in-process (krusty, the library the kustomize binary wraps, at
// the version `make k8s` installs) on dir, as `kustomize build dir` does.
func renderDir(dir string) ([]object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []object
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		j, err := yaml.YAMLToJSONStrict(y)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		out = append(out, object{APIVersion: r.GetApiVersion(), Kind: r.GetKind(), Name: r.GetName(), JSON: j})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kustomize build %s rendered nothing", dir)
	}
	return out, nil
}

// kinds maps apiVersion/kind to a new value of the Go type the object must decode into:
// the official k8s.io/api types for Kubernetes' own kinds, the local types of crd_test.go
// for the custom resources (KEDA, CloudNativePG). A kind missing here fails the test.
var kinds = map[string]func() any{
	"v1/Namespace":                           func() any { return &corev1.Namespace{} },
	"v1/ServiceAccount":                      func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":                           func() any { return &corev1.ConfigMap{} },
	"v1/Service":                             func() any { return &corev1.Service{} },
	"apps/v1/Deployment":                     func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                    func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                           func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":          func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/Ingress":           func() any { return &networkingv1.Ingress{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"keda.sh/v1alpha1/ScaledObject":          func() any { return &ScaledObject{} },
	"postgresql.cnpg.io/v1/Cluster":          func() any { return &PGCluster{} },
	"postgresql.cnpg.io/v1/ScheduledBackup":  func() any { return &ScheduledBackup{} },
	"barmancloud.cnpg.io/v1/ObjectStore":     func() any { return &ObjectStore{} },
}

// decodeStrict decodes JSON into v the way the API server does with strict field
// validation: an unknown field, a field in the wrong case or a duplicate field is an
// error, and so is a value of the wrong type (a bad quantity, a string for a number).
func decodeStrict(data []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decoded is a rendered kustomization with every object decoded into its type.
type decoded struct {
	objects []object
	typed   map[string]any // "Kind/name" → decoded value
}

func (d decoded) get(kind, name string) any { return d.typed[kind+"/"+name] }

// all returns the decoded objects of one Go type, sorted by name.
func all[T any](d decoded) []*T {
	var names []string
	for k, v := range d.typed {
		if _, ok := v.(*T); ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	out := make([]*T, 0, len(names))
	for _, n := range names {
		out = append(out, d.typed[n].(*T))
	}
	return out
}

// decodeAll decodes every object strictly, failing the test for each one that does not.
func decodeAll(t *testing.T, objs []object) decoded {
	t.Helper()
	d := decoded{objects: objs, typed: map[string]any{}}
	for _, o := range objs {
		newT, ok := kinds[o.key()]
		if !ok {
			t.Errorf("%s: %s is not a kind these tests know; add its type to kinds", o, o.key())
			continue
		}
		v := newT()
		if err := decodeStrict(o.JSON, v); err != nil {
			t.Errorf("%s does not decode strictly into %T: %v", o, v, err)
			continue
		}
		if _, dup := d.typed[o.String()]; dup {
			t.Errorf("%s is rendered twice", o)
		}
		d.typed[o.String()] = v
	}
	return d
}

var (
	renders     sync.Map // dir → *renderResult
	sourceOnce  sync.Once
	sourceCache *goSources
)

type renderResult struct {
	once sync.Once
	objs []object
	err  error
}

// rendered renders dir once per test binary (kustomize takes a moment) and decodes it
// strictly for each caller.
func rendered(t *testing.T, dir string) decoded {
	t.Helper()
	v, _ := renders.LoadOrStore(dir, &renderResult{})
	r := v.(*renderResult)
	r.once.Do(func() { r.objs, r.err = renderDir(dir) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	return decodeAll(t, r.objs)
}

// goSources is what the services' Go code (../services, ../pkg, tests excluded) says
// about configuration and metrics.
type goSources struct {
	// vars are the SHIPFILE_* variables read anywhere, and byService those read by
	// each service (its module plus pkg).
	vars      map[string]bool
	byService map[string]map[string]bool
	// defaults are the variables' default tags.
	defaults map[string]string
	// secrets are the variables tagged secret:"true".
	secrets map[string]bool
	// metrics are the names of the metrics the code registers, with their kind.
	metrics map[string]string
	// consts are the string constants, "package.Name" → value.
	consts map[string]string
	// natsStarts are the services' mains' calls that connect to NATS or create the
	// streams (service.Open, events.Connect, bus.Connect, events.EnsureStreams), "file: call".
	natsStarts []string
}

var (
	quotedVar  = regexp.MustCompile(`"(SHIPFILE_[A-Z0-9_]+)"`)
	envTag     = regexp.MustCompile("`[^`]*env:\"(SHIPFILE_[A-Z0-9_]+)\"[^`]*`")
	defaultTag = regexp.MustCompile(`default:"([^"]*)"`)
	secretTag  = regexp.MustCompile(`secret:"true"`)
	metricDecl = regexp.MustCompile(`prometheus\.New(Counter|Gauge|Histogram|Summary)(Vec)?\(prometheus\.\w+Opts\{\s*Name:\s*"([a-z_:][a-z0-9_:]*)"`)
	natsStart  = regexp.MustCompile(`(?:events\.Connect|bus\.Connect|events\.EnsureStreams|service\.Open)\([^\n]*`)
	stringDecl = regexp.MustCompile(`(?m)^\s*(\w+)\s*(?:=|string\s*=)\s*"([^"]*)"`)
)

// sources reads the Go code once.
func sources(t *testing.T) *goSources {
	t.Helper()
	sourceOnce.Do(func() {
		s := &goSources{vars: map[string]bool{}, byService: map[string]map[string]bool{}, defaults: map[string]string{},
			secrets: map[string]bool{}, metrics: map[string]string{}, consts: map[string]string{}}
		services, _ := filepath.Glob("../services/*")
		roots := append([]string{"../pkg"}, services...)
		perRoot := map[string]map[string]bool{}
		for _, root := range roots {
			seen := map[string]bool{}
			_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
					return filepath.SkipDir
				}
				if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
					return nil
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				src := string(b)
				for _, m := range quotedVar.FindAllStringSubmatch(src, -1) {
					seen[m[1]] = true
				}
				for _, m := range envTag.FindAllStringSubmatch(src, -1) {
					seen[m[1]] = true
					if d := defaultTag.FindStringSubmatch(m[0]); d != nil {
						s.defaults[m[1]] = d[1]
					}
					if secretTag.MatchString(m[0]) {
						s.secrets[m[1]] = true
					}
				}
				for _, m := range metricDecl.FindAllStringSubmatch(src, -1) {
					s.metrics[m[3]] = strings.ToLower(m[1])
				}
				if strings.Contains(path, "/cmd/") { // the services' mains, not test helpers
					for _, m := range natsStart.FindAllString(src, -1) {
						s.natsStarts = append(s.natsStarts, path+": "+m)
					}
				}
				pkg := filepath.Base(filepath.Dir(path))
				for _, m := range stringDecl.FindAllStringSubmatch(src, -1) {
					s.consts[pkg+"."+m[1]] = m[2]
				}
				return nil
			})
			perRoot[root] = seen
			for v := range seen {
				s.vars[v] = true
			}
		}
		for _, svc := range services {
			set := map[string]bool{}
			for v := range perRoot["../pkg"] {
				set[v] = true
			}
			for v := range perRoot[svc] {
				set[v] = true
			}
			s.byService[filepath.Base(svc)] = set
		}
		sourceCache = s
	})
	if sourceCache == nil || len(sourceCache.vars) == 0 || len(sourceCache.metrics) == 0 {
		t.Fatal("found no SHIPFILE_* variables or metrics in ../services and ../pkg")
	}
	return sourceCache
}
