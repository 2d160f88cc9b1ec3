package deploy_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const chart = "helm/sendonce"

// rendered is what `helm template` made, each object decoded strictly
// (an unknown field fails) into the Kubernetes API's own types.
type rendered struct {
	deployments map[string]*appsv1.Deployment // by component label
	services    []*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget // by component label
}

func helmTemplate(t *testing.T, helm string, set ...string) rendered {
	t.Helper()
	args := []string{"template", "t", chart}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	r := rendered{deployments: map[string]*appsv1.Deployment{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("rendered object: %v\n%s", err, doc)
		}
		if tm.Kind == "" {
			continue // only comments
		}
		strict := func(into any) {
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s does not decode as the Kubernetes type: %v\n%s", tm.Kind, err, doc)
			}
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			d := &appsv1.Deployment{}
			strict(d)
			r.deployments[d.Labels["app.kubernetes.io/component"]] = d
		case "v1 Service":
			s := &corev1.Service{}
			strict(s)
			r.services = append(r.services, s)
		case "policy/v1 PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			strict(p)
			r.pdbs[p.Labels["app.kubernetes.io/component"]] = p
		default:
			t.Fatalf("the chart renders a %s %s this test does not check", tm.APIVersion, tm.Kind)
		}
	}
	return r
}

// TestHelmChart_LintsAndRendersWhatTheAPIServerTakes: `helm lint --strict`
// passes, and `helm template` (defaults, and with every option on) renders
// API and worker Deployments, a Service of the API pods, probes on /healthz
// and /readyz, PodDisruptionBudgets, secrets only by reference, a
// non-root read-only container, a grace period past serve's shutdown
// grace, and only flags and variables serve takes.
func TestHelmChart_LintsAndRendersWhatTheAPIServerTakes(t *testing.T) {
	home, _ := os.UserHomeDir()
	helm := tool(t, "helm", filepath.Join(home, "go", "bin", "helm"))
	if out, err := exec.Command(helm, "lint", "--strict", chart).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Comments may show how to make the Secret; values may not hold one.
	uncommented := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(values, nil)
	if regexp.MustCompile(`(?i)postgres(ql)?://|password:|whsec_`).Match(uncommented) {
		t.Error("values.yaml holds a secret's value: secrets are Secrets the values name")
	}
	sf := loadServeFlags(t)
	grace := sf.defaultGrace(t)
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"defaults", nil},
		{"every option", []string{"api.smtp.enabled=true", "api.smtp.tlsSecret=smtp-tls", "api.mxserver.enabled=true",
			"api.mxserver.name=mx.example.com", "api.mxserver.tlsSecret=mx-tls", "secretKey.existingSecret=sendonce-key",
			"transportSecret.existingSecret=sendonce-relay", "env[0].name=SENDONCE_FROM", "env[0].value=mail@example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := helmTemplate(t, helm, tc.set...)
			api, worker := r.deployments["api"], r.deployments["worker"]
			if api == nil || worker == nil || len(r.deployments) != 2 {
				t.Fatalf("deployments %v: want api and worker", keys(r.deployments))
			}
			for role, d := range r.deployments {
				checkPod(t, sf, role, d, grace)
			}
			checkAPIProbes(t, api)
			checkService(t, r.services, api, worker)
			for role, d := range r.deployments {
				p := r.pdbs[role]
				if p == nil {
					t.Errorf("no PodDisruptionBudget for %s", role)
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
				if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("the %s PodDisruptionBudget does not select its pods", role)
				}
			}
			if mn := r.pdbs["api"].Spec.MinAvailable; mn == nil || mn.IntValue() < 1 || mn.IntValue() >= int(*api.Spec.Replicas) {
				t.Errorf("api PodDisruptionBudget minAvailable %v with %d replicas: want at least one up, and room to drain", mn, *api.Spec.Replicas)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// checkPod: the role's args and variables are serve's, secrets come by
// secretKeyRef, the pod runs unprivileged on a read-only root with a
// writable /tmp, files named by variables are mounted from Secrets, and
// the grace period outlasts serve's.
func checkPod(t *testing.T, sf serveFlags, role string, d *appsv1.Deployment, grace time.Duration) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers", role, len(pod.Containers))
	}
	c := pod.Containers[0]
	sf.checkArgs(t, role, c.Args)
	if i := indexOf(c.Args, "--role"); i < 0 || c.Args[i+1] != role {
		t.Errorf("%s: args %q do not run --role %s", role, c.Args, role)
	}
	if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s: the selector does not match the pod's labels", role)
	}
	mounts := map[string]string{} // path → volume
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	secretVolumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secretVolumes[v.Name] = true
		}
	}
	for _, e := range c.Env {
		sf.checkEnv(t, role, e.Name)
		switch {
		case e.Name == "SENDONCE_DB" || e.Name == "SENDONCE_SECRET_KEY":
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.Value != "" {
				t.Errorf("%s: %s is not taken from a Secret by reference", role, e.Name)
			}
		case strings.HasSuffix(e.Name, "_TLS_CERT") || strings.HasSuffix(e.Name, "_TLS_KEY"):
			if !secretVolumes[mounts[filepath.Dir(e.Value)]] {
				t.Errorf("%s: %s=%s is not in a volume mounted from a Secret", role, e.Name, e.Value)
			}
		}
	}
	sc, psc := c.SecurityContext, pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: the pod may run as root: %+v", role, psc)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || len(sc.Capabilities.Drop) == 0 {
		t.Errorf("%s: container security context %+v: want no privilege escalation, a read-only root, capabilities dropped", role, sc)
	}
	if _, ok := mounts["/tmp"]; !ok {
		t.Errorf("%s: no writable /tmp on the read-only root", role)
	}
	var drain time.Duration
	for _, e := range c.Env {
		if e.Name == "SENDONCE_DRAIN_DELAY" {
			d, err := time.ParseDuration(e.Value)
			if err != nil {
				t.Errorf("%s: SENDONCE_DRAIN_DELAY=%q: %v", role, e.Value, err)
			}
			drain = d
		}
	}
	if role == "api" && drain == 0 {
		t.Errorf("api: no SENDONCE_DRAIN_DELAY: the Service would route to a pod whose listener is closing")
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= grace+drain {
		t.Errorf("%s: terminationGracePeriodSeconds %v: want more than the drain delay %s plus serve's shutdown grace %s", role, g, drain, grace)
	}
	if role == "worker" {
		checkWorkerOps(t, c)
	}
}

// checkWorkerOps: a worker serves no API, so its probes ask /readyz and
// /healthz on the --ops-addr port, which it names "ops".
func checkWorkerOps(t *testing.T, c corev1.Container) {
	t.Helper()
	ops := ""
	for _, e := range c.Env {
		if e.Name == "SENDONCE_OPS_ADDR" {
			ops = e.Value
		}
	}
	_, port, err := net.SplitHostPort(ops)
	if err != nil || !strings.HasPrefix(ops, "0.0.0.0:") {
		t.Fatalf("worker: SENDONCE_OPS_ADDR=%q: want the ops listener on every address of the pod", ops)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "ops" || itoa(c.Ports[0].ContainerPort) != port {
		t.Errorf("worker: ports %+v, want one named ops on %s", c.Ports, port)
	}
	for name, want := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}} {
		if want.p == nil || want.p.HTTPGet == nil || want.p.HTTPGet.Path != want.path || want.p.HTTPGet.Port.String() != "ops" {
			t.Errorf("worker: %s probe %+v, want GET %s on port ops", name, want.p, want.path)
		}
	}
}

// checkAPIProbes: readiness on /readyz, liveness and start-up on /healthz,
// all on the container port the API listens on.
func checkAPIProbes(t *testing.T, api *appsv1.Deployment) {
	t.Helper()
	c := api.Spec.Template.Spec.Containers[0]
	addr := ""
	for _, e := range c.Env {
		if e.Name == "SENDONCE_ADDR" {
			addr = e.Value
		}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil || !strings.HasPrefix(addr, "0.0.0.0:") {
		t.Fatalf("api: SENDONCE_ADDR=%q: want every address of the pod", addr)
	}
	named := map[string]int32{}
	for _, p := range c.Ports {
		named[p.Name] = p.ContainerPort
		if p.ContainerPort < 1024 {
			t.Errorf("api: container port %d needs a privilege the container does not have", p.ContainerPort)
		}
	}
	if itoa(named["http"]) != port {
		t.Errorf("api: port http is %d, the API listens on %s", named["http"], port)
	}
	for name, want := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}, "startup": {c.StartupProbe, "/healthz"}} {
		if want.p == nil || want.p.HTTPGet == nil || want.p.HTTPGet.Path != want.path || want.p.HTTPGet.Port.String() != "http" {
			t.Errorf("api: %s probe %+v, want GET %s on port http", name, want.p, want.path)
		}
	}
}

// checkService: one Service, selecting the API pods and not the workers,
// each target port a port the API container names.
func checkService(t *testing.T, svcs []*corev1.Service, api, worker *appsv1.Deployment) {
	t.Helper()
	if len(svcs) != 1 {
		t.Fatalf("%d Services, want 1", len(svcs))
	}
	s := svcs[0]
	sel := labels.SelectorFromSet(s.Spec.Selector)
	if !sel.Matches(labels.Set(api.Spec.Template.Labels)) || sel.Matches(labels.Set(worker.Spec.Template.Labels)) {
		t.Errorf("the Service selects %v: want the API pods only", s.Spec.Selector)
	}
	named := map[string]bool{}
	for _, p := range api.Spec.Template.Spec.Containers[0].Ports {
		named[p.Name] = true
	}
	for _, p := range s.Spec.Ports {
		if !named[p.TargetPort.String()] {
			t.Errorf("Service port %s targets %s, which the API container does not name", p.Name, p.TargetPort.String())
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v && i+1 < len(s) {
			return i
		}
	}
	return -1
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
