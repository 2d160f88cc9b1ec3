package deploy_test

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

type composeFile struct {
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Image       string                                `json:"image"`
	Build       *struct{ Context, Dockerfile string } `json:"build"`
	Command     []string                              `json:"command"`
	Environment map[string]string                     `json:"environment"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Healthcheck *struct {
		Test    []string `json:"test"`
		Disable bool     `json:"disable"`
	} `json:"healthcheck"`
	StopGracePeriod string `json:"stop_grace_period"`
}

// TestCompose_PostgresTwoAPIsAndAWorker: compose.yaml runs PostgreSQL with
// a health check, two `serve --role api` and one `--role worker` built from
// the Dockerfile on one database URL, each waiting for PostgreSQL to be
// healthy; the APIs have the image's health check, the worker (no HTTP)
// none; every flag and variable is one serve takes, and the stop timeout
// is longer than serve's shutdown grace.
func TestCompose_PostgresTwoAPIsAndAWorker(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(b) // anchors and merge keys resolved
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := json.NewDecoder(strings.NewReader(string(js)))
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	pg, ok := c.Services["postgres"]
	if !ok || !strings.HasPrefix(pg.Image, "postgres:") || pg.Healthcheck == nil || len(pg.Healthcheck.Test) == 0 {
		t.Fatalf("no postgres service with a health check: %+v", pg)
	}
	df, err := parseDockerfile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	health := imageHealthcheck(t, df.final())
	sf := loadServeFlags(t)
	grace := sf.defaultGrace(t)
	roles := map[string]int{}
	var dbs []string
	for name, s := range c.Services {
		if name == "postgres" {
			continue
		}
		sf.checkArgs(t, name, s.Command)
		role := "all"
		if i := slices.Index(s.Command, "--role"); i >= 0 && i+1 < len(s.Command) {
			role = s.Command[i+1]
		}
		roles[role]++
		if s.Build == nil || s.Build.Context != ".." || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s: not built from the repository's Dockerfile: %+v", name, s.Build)
		}
		for k := range s.Environment {
			sf.checkEnv(t, name, k)
		}
		dbs = append(dbs, s.Environment["SENDONCE_DB"])
		if s.DependsOn["postgres"].Condition != "service_healthy" {
			t.Errorf("%s: does not wait for postgres to be healthy", name)
		}
		if d, err := time.ParseDuration(s.StopGracePeriod); err != nil || d <= grace {
			t.Errorf("%s: stop_grace_period %q, want more than serve's shutdown grace %s", name, s.StopGracePeriod, grace)
		}
		switch {
		case role == "worker":
			ops := ""
			if i := slices.Index(s.Command, "--ops-addr"); i >= 0 && i+1 < len(s.Command) {
				ops = s.Command[i+1]
			}
			_, port, _ := net.SplitHostPort(ops)
			want := append([]string{"CMD"}, append(slices.Clone(health), "--url", "http://127.0.0.1:"+port+"/healthz")...)
			if port == "" || s.Healthcheck == nil || s.Healthcheck.Disable || !slices.Equal(s.Healthcheck.Test, want) {
				t.Errorf("%s: a worker serves no API: want --ops-addr and a health check asking its /healthz (%q), got %+v", name, want, s.Healthcheck)
			}
		case role != "worker" && (s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, append([]string{"CMD"}, health...))):
			t.Errorf("%s: health check %+v, want the image's %q", name, s.Healthcheck, health)
		}
	}
	if roles["api"] != 2 || roles["worker"] != 1 || len(roles) != 2 {
		t.Errorf("roles %v: want two api processes and one worker", roles)
	}
	for _, db := range dbs {
		// ${VAR…} is compose's interpolation (the password, from outside).
		u, err := url.Parse(regexp.MustCompile(`\$\{[^}]*\}`).ReplaceAllString(db, "x"))
		if db != dbs[0] || err != nil || u.Scheme != "postgres" || u.Hostname() != "postgres" ||
			u.User.Username() != pg.Environment["POSTGRES_USER"] || u.Path != "/"+pg.Environment["POSTGRES_DB"] {
			t.Errorf("SENDONCE_DB %q: every process must share the postgres service's database (%q, %v)", db, dbs[0], err)
		}
	}
}
