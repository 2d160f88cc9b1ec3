package main_test

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The binary says which sendonce it is: `version --json` names the commit
// it was built from (a build in a git checkout is stamped with it), the
// one-line form names it too, and a running server's /healthz names the
// version.
func TestVersion_NamesTheCommitAndHealthzTheVersion(t *testing.T) {
	var v struct {
		Version, Revision, Go string
		Modified              bool
	}
	if err := json.Unmarshal([]byte(run(t, binPath, "version", "--json")), &v); err != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Fatalf("version --json: %+v %v", v, err)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && len(head) > 12 {
		if want := strings.TrimSpace(string(head)); v.Revision != want {
			t.Errorf("version --json names revision %q, want the checkout's %s", v.Revision, want)
		}
		if line := run(t, binPath, "version"); v.Revision == "" || !strings.Contains(line, v.Revision[:min(12, len(v.Revision))]) {
			t.Errorf("version says %q, without the commit", line)
		}
	}
	p := startServe(t, "--db", "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	resp, err := http.Get(p.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h["version"] != v.Version {
		t.Errorf("/healthz %v (%v), want version %q", h, err, v.Version)
	}
}
