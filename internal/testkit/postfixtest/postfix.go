// Package postfixtest runs Debian's Postfix for a test: its own
// configuration, queue and log directories under the test's temporary
// directory, listening on a loopback port, relaying chosen domains to
// chosen loopback next hops. It needs the postfix package and root (Postfix
// drops to its own user); without them the test is skipped, and under CI=1
// it fails (.ci/run installs postfix).
package postfixtest

import (
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/daemontest"
)

// Options says where mail goes.
type Options struct {
	// Routes maps a recipient domain to the "host:port" Postfix relays its
	// mail to (no DNS is used). Postfix accepts mail from loopback for
	// these domains only.
	Routes map[string]string
}

// Postfix is a running instance.
type Postfix struct {
	Addr string // "127.0.0.1:port" of its SMTP listener
	dir  string
}

// masterCF is the services an instance runs, its smtpd listening on
// LISTEN: no chroot (the queue directory is a temporary one), no local
// delivery. bench/postfix_master.sh prints the same file for the
// benchmarks' Postfix.
//
//go:embed master.cf
var masterCF string

// Start starts Postfix; t.Cleanup stops it. addr is the loopback address
// it listens on ("" picks a free port).
func Start(t testing.TB, addr string, o Options) *Postfix {
	t.Helper()
	bin := lookPostfix(t)
	if addr == "" {
		addr = FreeAddr(t)
	}
	p := &Postfix{Addr: addr, dir: makeDirs(t)}
	p.writeFile(t, "main.cf", mainCF(p.dir, o.Routes))
	p.writeFile(t, "master.cf", strings.Replace(masterCF, "LISTEN", addr, 1))
	p.start(t, bin)
	// "postfix start" may return before its master process listens.
	daemontest.WaitListening(t, "postfix", p.Addr, nil, p.Log)
	return p
}

// lookPostfix returns the postfix binary, or skips the test (fails it
// under CI) where Postfix cannot run.
func lookPostfix(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("postfix")
	if err == nil && os.Geteuid() != 0 {
		err = fmt.Errorf("postfix must be started as root (it runs as its own user)")
	}
	if err == nil {
		_, err = user.Lookup("postfix")
	}
	if err != nil {
		daemontest.Missing(t, "postfix", err, "apt-get install -y postfix", "Debian's postfix, run as root")
	}
	return bin
}

// makeDirs makes the instance's directories: etc, spool and data (which
// Postfix writes as its own user) in a new directory. It is not under
// t.TempDir: Postfix's own processes (user postfix) must reach it.
func makeDirs(t testing.TB) string {
	t.Helper()
	dir := daemontest.MakeDir(t, "postfixtest-", "etc", "spool", "data")
	if out, err := exec.Command("chown", "postfix", filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		t.Fatalf("chown data directory: %v: %s", err, out)
	}
	return dir
}

// mainCFBase is the main.cf every instance has, the benchmarks' too
// (bench/postfix_master.sh): loopback only, no TLS on smtpd, no local
// delivery, its queue and log under $DIR.
//
//go:embed main.cf
var mainCFBase string

// mainCF is the main.cf of an instance in dir: it relays the routes'
// domains (in a stable order) to their hops, without DNS or TLS, and
// retries within seconds.
func mainCF(dir string, routes map[string]string) string {
	var domains, hops []string
	for d, hop := range routes {
		domains = append(domains, d)
		hops = append(hops, fmt.Sprintf("%s=smtp:[%s]:%s", d, hostOf(hop), portOf(hop)))
	}
	sort.Strings(domains)
	sort.Strings(hops)
	return strings.NewReplacer("$DIR", dir, "$HOSTNAME", "relay.postfix.test").Replace(mainCFBase) + strings.Join([]string{
		"relay_domains = " + strings.Join(domains, ", "),
		"transport_maps = inline:{ " + strings.Join(hops, ", ") + " }",
		"smtp_dns_support_level = disabled",
		"smtp_tls_security_level = none",
		"local_recipient_maps =",
		"queue_run_delay = 1s",
		"minimal_backoff_time = 1s",
		"maximal_backoff_time = 2s",
		"delay_warning_time = 0",
		"",
	}, "\n")
}

func (p *Postfix) writeFile(t testing.TB, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, "etc", name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// start starts Postfix on its configuration; t.Cleanup stops it and
// removes its directory (showing the log of a failed test first).
func (p *Postfix) start(t testing.TB, bin string) {
	t.Helper()
	etc := filepath.Join(p.dir, "etc")
	if out, err := exec.Command(bin, "-c", etc, "start").CombinedOutput(); err != nil {
		os.RemoveAll(p.dir)
		t.Fatalf("postfix start: %v: %s (log: %s)", err, out, p.Log())
	}
	daemontest.Cleanup(t, "postfix", p.dir, func() { _ = exec.Command(bin, "-c", etc, "stop").Run() }, p.Log)
}

// Log returns Postfix's log so far.
func (p *Postfix) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "maillog"))
	return string(b)
}

// FreeAddr returns a loopback address no one listens on just now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return daemontest.FreeAddr(t, "127.0.0.1")
}

func hostOf(hp string) string { h, _, _ := net.SplitHostPort(hp); return h }
func portOf(hp string) string { _, p, _ := net.SplitHostPort(hp); return p }
