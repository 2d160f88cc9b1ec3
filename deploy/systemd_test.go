package deploy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitFile is a systemd unit's keys, each with every value it is given.
type unitFile map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "["):
			section = strings.Trim(l, "[]")
		default:
			k, v, _ := strings.Cut(l, "=")
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	return u
}

func (u unitFile) last(key string) string {
	v := u[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnit_OwnUserPort25AndAStopTimeoutPastTheGrace: the unit runs
// serve as a user of its own with its state directory, may bind port 25
// without root, waits longer than serve's shutdown grace before SIGKILL,
// sets only variables serve reads, and `systemd-analyze verify` finds
// nothing to say about it (its ExecStart pointed at the built binary).
func TestSystemdUnit_OwnUserPort25AndAStopTimeoutPastTheGrace(t *testing.T) {
	u := parseUnit(t, "systemd/sendonce.service")
	sf := loadServeFlags(t)
	if u.last("Service.DynamicUser") != "yes" && (u.last("Service.User") == "" || u.last("Service.User") == "root") {
		t.Error("the unit runs as root: want DynamicUser=yes or a User of its own")
	}
	if !strings.Contains(u.last("Service.AmbientCapabilities"), "CAP_NET_BIND_SERVICE") ||
		strings.TrimSpace(u.last("Service.CapabilityBoundingSet")) != "CAP_NET_BIND_SERVICE" {
		t.Errorf("AmbientCapabilities %q, CapabilityBoundingSet %q: want CAP_NET_BIND_SERVICE and nothing else",
			u.last("Service.AmbientCapabilities"), u.last("Service.CapabilityBoundingSet"))
	}
	state := u.last("Service.StateDirectory")
	if state == "" {
		t.Fatal("no StateDirectory")
	}
	envs := map[string]string{}
	for _, e := range u["Service.Environment"] {
		k, v, _ := strings.Cut(e, "=")
		envs[k] = v
		sf.checkEnv(t, "Environment", k)
	}
	if db := envs["SENDONCE_DB"]; !strings.HasPrefix(db, "sqlite:/var/lib/"+state+"/") {
		t.Errorf("SENDONCE_DB=%q is not in the StateDirectory /var/lib/%s", db, state)
	}
	stop, err := time.ParseDuration(u.last("Service.TimeoutStopSec"))
	if grace := sf.defaultGrace(t); err != nil || stop <= grace {
		t.Errorf("TimeoutStopSec=%s (%v): want more than serve's shutdown grace %s", u.last("Service.TimeoutStopSec"), err, grace)
	}
	exec0 := strings.Fields(u.last("Service.ExecStart"))
	sf.checkArgs(t, "ExecStart", exec0[1:])

	analyze := tool(t, "systemd-analyze")
	b, err := os.ReadFile("systemd/sendonce.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "sendonce.service")
	text := strings.Replace(string(b), "ExecStart="+exec0[0], "ExecStart="+binPath, 1)
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
