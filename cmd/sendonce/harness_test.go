package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// The harness every test here shares: the binary built once, a running
// `sendonce serve` (proc), the CLI, and the databases the tests run on.

// binPath is the sendonce binary TestMain builds once for every test here.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sendonce-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "sendonce")
	// Stamped with the checkout's commit as a user's build is (this
	// machine's GOFLAGS may say -buildvcs=false): TestVersion reads it.
	args := []string{"build", "-buildvcs=auto", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sendonce:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaryTest skips the test under -short: it builds and runs the binary.
func binaryTest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the binary")
	}
}

// sqliteDB is the --db of a fresh SQLite database in the test's own
// temporary folder.
func sqliteDB(t *testing.T) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "sendonce.db")
}

// createKey makes an API key in db with the CLI, as an operator would,
// and returns its secret.
func createKey(t *testing.T, db, name, scopes string) string {
	t.Helper()
	return run(t, binPath, "keys", "create", "--db", db, "--name", name, "--scopes", scopes)
}

// proc is one running `sendonce serve`.
type proc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+)|"msg":"listening","addr":"([^"]+)"`)

// startServe starts `sendonce serve` with args and kills it when the
// test ends.
func startServe(t *testing.T, args ...string) *proc {
	t.Helper()
	p, err := spawnServe(binPath, args...)
	if p != nil {
		t.Cleanup(p.kill)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spawnServe starts `sendonce serve` and waits until it listens. It never
// touches a testing.T, so tests may call it from goroutines: the caller
// reports the error and, whenever p is not nil, kills p when done.
func spawnServe(bin string, args ...string) (*proc, error) {
	return spawnServeEnv(bin, nil, listenRE, args...)
}

// spawnServeEnv is spawnServe with env added to the process's environment,
// waiting for a log line that ready matches (its first non-empty group,
// if any, is the address to make p.url of).
func spawnServeEnv(bin string, env []string, ready *regexp.Regexp, args ...string) (*proc, error) {
	p := &proc{done: make(chan struct{})}
	// --rate-limit 0: these clients retry one key at full speed to test
	// crashes, not the per-key request limit.
	p.cmd = exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--rate-limit", "0"}, args...)...)
	p.cmd.Env = append(append(os.Environ(), "SENDONCE_LOG_LEVEL=info"), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start serve: %w", err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		// A line past the buffer ends the scan: note it, and keep reading
		// so the server never blocks on a full stderr pipe.
		defer func() {
			if err := sc.Err(); err != nil {
				p.mu.Lock()
				p.logs.WriteString("(test: log reading stopped: " + err.Error() + ")\n")
				p.mu.Unlock()
			}
			_, _ = io.Copy(io.Discard, stderr)
		}()
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := ready.FindStringSubmatch(line); m != nil {
				select {
				case addr <- strings.Join(m[1:], ""):
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		if a != "" {
			p.url = "http://" + a
		}
	case <-time.After(30 * time.Second):
		return p, fmt.Errorf("serve did not start (no line matching %s):\n%s", ready, p.logText())
	}
	return p, nil
}

// apiHTTP is the client of the tests' API calls: a server that hangs
// fails the test rather than hanging it.
var apiHTTP = &http.Client{Timeout: 30 * time.Second}

// apiCall makes one request of a running server's API as the key secret
// (with an Idempotency-Key unless idem is empty) and returns the answer's
// status and body.
func apiCall(t *testing.T, method, url, secret, idem, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := apiHTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, url, err)
	}
	return resp.StatusCode, b
}

// sigkill kills the process as a crash would (no shutdown code runs) and
// waits until it is gone and its whole log is read.
func (p *proc) sigkill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	_ = p.cmd.Wait()
	<-p.done
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("sendonce %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// eachDB runs fn as a subtest on a fresh SQLite database and on a fresh
// PostgreSQL one (skipped without PostgreSQL, failed under CI): the crash
// tests hold on both.
func eachDB(t *testing.T, fn func(t *testing.T, backend, db string)) {
	t.Helper()
	binaryTest(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			db := sqliteDB(t)
			if backend == "postgres" {
				db = pgtest.NewDatabase(t)
			}
			fn(t, backend, db)
		})
	}
}

var (
	smtpListenRE    = regexp.MustCompile(`msg="smtp listening" addr=(\S+)`)
	inboundListenRE = regexp.MustCompile(`msg="inbound listening" addr=(\S+)`)
)

// smtpAddr waits for the process's SMTP submission listener and returns
// its address.
func (p *proc) smtpAddr(t *testing.T) string {
	t.Helper()
	return p.listenAddr(t, smtpListenRE, "SMTP")
}

// inboundAddr waits for the process's inbound listener and returns its
// address.
func (p *proc) inboundAddr(t *testing.T) string {
	t.Helper()
	return p.listenAddr(t, inboundListenRE, "inbound")
}

// listenAddr waits for the log line re matches (a listener's, what) and
// returns the address it names.
func (p *proc) listenAddr(t *testing.T, re *regexp.Regexp, what string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(p.logText()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("serve did not start its %s listener:\n%s", what, p.logText())
	return ""
}

type sendView struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	MessageID string `json:"message_id"`
}
