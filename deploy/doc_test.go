// Package deploy_test checks the files an operator deploys sendonce with
// (the root Dockerfile, compose.yaml, the Helm chart, the systemd unit and
// the Grafana dashboard) against the binary they run: every flag and
// variable they set must be one that `sendonce serve` takes, and each file
// is checked by the tool that reads it where this machine has one.
package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// binPath is sendonce built as the Dockerfile builds it (TestMain).
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sendonce-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath, err = buildAsDockerfile(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build sendonce as the Dockerfile does:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildAsDockerfile runs the Dockerfile's `go build` line itself (its
// variables, flags and package; -o into dir) from the repository root, so
// the binary tested is the image's.
func buildAsDockerfile(dir string) (string, error) {
	df, err := parseDockerfile("../Dockerfile")
	if err != nil {
		return "", err
	}
	line, args := df.goBuild()
	if line == nil {
		return "", fmt.Errorf("the Dockerfile runs no go build")
	}
	out := filepath.Join(dir, "sendonce")
	var argv, env []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case len(argv) == 0 && strings.Contains(a, "=") && !strings.HasPrefix(a, "-"):
			env = append(env, a) // VAR=value before the command
		case a == "-o" && i+1 < len(args):
			argv = append(argv, "-o", out)
			i++
		default:
			argv = append(argv, strings.ReplaceAll(a, "${VERSION}", "deploy-test"))
		}
	}
	if len(argv) < 2 || argv[0] != "go" || argv[1] != "build" {
		return "", fmt.Errorf("the Dockerfile's build line is not `go build`: %q", args)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// serveFlags is what `sendonce serve -h` lists: its flags and the
// variables they read, plus SENDONCE_SECRET_KEY (no flag: it would show in
// ps). The defaults the deploy files depend on are read from it too.
type serveFlags struct {
	flags, envs map[string]bool
	help        string
}

func loadServeFlags(t *testing.T) serveFlags {
	t.Helper()
	out, err := exec.Command(binPath, "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("sendonce serve -h: %v\n%s", err, out)
	}
	s := serveFlags{flags: map[string]bool{}, envs: map[string]bool{"SENDONCE_SECRET_KEY": true}, help: string(out)}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(s.help, -1) {
		s.flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\(env (SENDONCE_[A-Z0-9_]+)`).FindAllStringSubmatch(s.help, -1) {
		s.envs[m[1]] = true
	}
	if len(s.flags) < 20 || !s.flags["role"] || !s.envs["SENDONCE_DB"] {
		t.Fatalf("serve -h lists %d flags, not --role or SENDONCE_DB:\n%s", len(s.flags), out)
	}
	return s
}

// checkArgs fails on a `serve` argument list with a flag serve lacks.
func (s serveFlags) checkArgs(t *testing.T, where string, args []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Errorf("%s: runs %q, not sendonce serve", where, args)
		return
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !s.flags[name] {
			t.Errorf("%s: serve has no flag %s", where, a)
		}
	}
}

// checkEnv fails on a SENDONCE_ variable serve does not read.
func (s serveFlags) checkEnv(t *testing.T, where, name string) {
	t.Helper()
	if strings.HasPrefix(name, "SENDONCE_") && !s.envs[name] {
		t.Errorf("%s: serve reads no variable %s", where, name)
	}
}

// defaultGrace is how long serve lets requests and attempts finish after
// SIGTERM by default, as its help says: the larger of a floor and
// --attempt-lease's default. Stop timeouts must exceed it.
func (s serveFlags) defaultGrace(t *testing.T) time.Duration {
	t.Helper()
	floor := regexp.MustCompile(`the larger of (\w+) and --attempt-lease`).FindStringSubmatch(s.help)
	lease := regexp.MustCompile(`(?m)^  -attempt-lease duration\n.*\(default (\w+)\)`).FindStringSubmatch(s.help)
	if floor == nil || lease == nil {
		t.Fatalf("serve -h no longer says the default shutdown grace:\n%s", s.help)
	}
	a, err1 := time.ParseDuration(floor[1])
	b, err2 := time.ParseDuration(lease[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("shutdown grace %q, attempt lease %q", floor[1], lease[1])
	}
	return max(a, b)
}

// tool finds a program, or fails under CI (which installs it) and skips
// elsewhere.
func tool(t *testing.T, name string, also ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range also {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed; .ci/run installs it", name)
	}
	t.Skipf("%s is not installed (.ci/run installs it)", name)
	return ""
}
