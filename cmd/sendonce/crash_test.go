package main_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/pgtest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

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

func buildBinary(t *testing.T) string {
	t.Helper()
	return binPath
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

func startServe(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p, err := spawnServe(bin, args...)
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
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			db := "sqlite:" + filepath.Join(t.TempDir(), "sendonce.db")
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

// TestCrash_SIGKILLWhileClientsRetry kills the real server with SIGKILL while
// clients retry their keys, restarts it on the same database, and proves
// that every key has exactly one send and the relay saw no Message-ID twice.
func TestCrash_SIGKILLWhileClientsRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	smtpd := smtptest.Start(t, smtptest.Options{})
	smtpd.SetBehaviour(smtptest.Behaviour{DelayData: 30 * time.Millisecond}) // keeps attempts in flight when the kill lands
	db := "sqlite:" + filepath.Join(t.TempDir(), "sendonce.db")
	secret := run(t, bin, "keys", "create", "--db", db, "--name", "crash", "--scopes", "send,read,admin")
	if !strings.HasPrefix(secret, "so_") {
		t.Fatalf("keys create printed %q, want only the secret", secret)
	}
	serveArgs := []string{"--db", db, "--transport", "smtp://" + smtpd.Addr + "?tls=none",
		"--retry-base", "50ms", "--attempt-lease", "2s", "--poll-interval", "20ms"}

	var current atomic.Pointer[proc]
	current.Store(startServe(t, bin, serveArgs...))

	const keys = 60
	const dupes = 3 // concurrent clients per key
	kc := newKeyClients(secret, 5*time.Second, 90*time.Second)
	var wg sync.WaitGroup
	for k := range keys {
		key := fmt.Sprintf("crash-key-%03d", k)
		body := fmt.Sprintf(`{"to":"user%d@example.com","subject":"Crash test %d","text":"hello %d"}`, k, k, k)
		for range dupes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				kc.send(t, key, body, func(int) (string, bool) { return current.Load().url, true }, 20*time.Millisecond)
			}()
		}
	}

	// Kill twice: once early, once when most clients are done.
	for _, after := range []int32{keys / 3, keys} {
		for kc.completed.Load() < after && time.Now().Before(kc.deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		old := current.Load()
		if err := old.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill: %v", err)
		}
		_ = old.cmd.Wait()
		<-old.done
		current.Store(startServe(t, bin, serveArgs...))
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("server log:\n%s", current.Load().logText())
	}

	// Every key: one distinct 200 body, one send; then every send decided:
	// sent, or unknown when the kill hit an attempt.
	keyNames := make([]string, keys)
	for k := range keys {
		keyNames[k] = fmt.Sprintf("crash-key-%03d", k)
	}
	url := current.Load().url
	ids := kc.oneSendEach(t, url, keyNames)
	sent, unknown := kc.decided(t, url, ids, 120*time.Second)
	requireRelayedOnce(t, smtpd, sent, unknown)
	t.Logf("%d keys × %d clients, 2 SIGKILLs: %d sends, %d sent, %d unknown, %d messages at the relay, none twice",
		keys, dupes, len(ids), sent, unknown, len(smtpd.Messages()))
}

// TestServe_GracefulShutdown sends SIGTERM and expects a clean exit.
func TestServe_GracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "sendonce.db")
	p := startServe(t, bin, "--db", db)
	resp, err := http.Get(p.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logText())
		}
	case <-ctx.Done():
		t.Fatal("no exit within 30s of SIGTERM")
	}
	if !strings.Contains(p.logText(), "stopped") {
		t.Errorf("no 'stopped' line in the log:\n%s", p.logText())
	}
}
