// Package daemontest is what the test kits that run a real daemon
// (postfixtest, dovecottest) share: the missing-daemon rule, a directory
// the daemon's own users can reach, a free loopback address, and the wait
// for its listener; and, for the kits of the servers the machine runs
// (pgtest, redistest), the rule for their URL variables.
package daemontest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Missing skips the test when the daemon cannot run (err), saying why,
// and fails it under CI, where .ci/run installs it (install says how).
func Missing(t testing.TB, daemon string, err error, install, needs string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s cannot run: %v (.ci/run installs it: %s)", daemon, err, install)
	}
	t.Skipf("needs %s: %v", needs, err)
}

// EnvURL returns the server URL envVar names. Unset, it skips the test,
// saying how to set it (example is a URL; what names the tests), or
// fails it under CI, whose .ci/run sets it.
func EnvURL(t testing.TB, envVar, what, example string) string {
	t.Helper()
	u := os.Getenv(envVar)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set; .ci/run sets it", envVar)
		}
		t.Skipf("%s tests skipped: set %s=%s to run them", what, envVar, example)
	}
	return u
}

// MakeDir makes a new directory with the subdirectories subs, all mode
// 0755. It is not under t.TempDir (0700): the daemon's processes, under
// users of their own, must reach it. The caller removes it.
func MakeDir(t testing.TB, prefix string, subs ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range subs {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// FreeAddr returns an address on host no one listens on just now.
func FreeAddr(t testing.TB, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitListening waits (up to 10 s) until the daemon takes connections on
// addr; it fails the test at once when stopped closes (the daemon exited;
// nil: it is not watched). log is the daemon's log, shown on failure.
func WaitListening(t testing.TB, daemon, addr string, stopped <-chan struct{}, log func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-stopped:
			t.Fatalf("%s exited:\n%s", daemon, log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s: %v\n%s", daemon, addr, err, log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cleanup registers the daemon's teardown: stop it, show its log when the
// test failed, and remove its directory.
func Cleanup(t testing.TB, daemon, dir string, stop func(), log func() string) {
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", daemon, log())
		}
		os.RemoveAll(dir)
	})
}
