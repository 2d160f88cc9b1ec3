// Package dovecottest runs Debian's Dovecot IMAP server for a test: its
// own configuration, state and Maildir storage in a temporary directory,
// listening on a loopback port, with passwd-file users. It needs the
// dovecot-imapd package; without it the test is skipped, and under CI=1 it
// fails (.ci/run installs it: apt-get install -y dovecot-imapd).
//
// Run as root (as CI does), Dovecot's mail processes take the users' uid
// (nobody); run as another user, everything runs as that user.
package dovecottest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/daemontest"
)

// Options says what the instance serves.
type Options struct {
	// Users maps a user name to its password (default: "alice": "secret").
	Users map[string]string
	// TLS: the IMAP listener serves implicit TLS (imaps) with a
	// certificate of a test CA (Dovecot.CAPEM) instead of plain IMAP with
	// STARTTLS.
	TLS bool
	// NoSpecialUse leaves the Sent folder's \Sent attribute out, so that a
	// client must find it by name.
	NoSpecialUse bool
	// SentName names the Sent folder (default "Sent").
	SentName string
	// Host is the loopback address to listen on (default 127.0.0.1).
	Host string
}

// Dovecot is a running instance.
type Dovecot struct {
	Addr string // "host:port" of its IMAP listener
	// CAPEM is the PEM of the CA that signed its certificate (TLS only).
	CAPEM []byte

	dir     string
	conf    string
	uid     int
	gid     int
	mu      sync.Mutex
	users   map[string]string
	cmd     *exec.Cmd
	stopped chan struct{}
}

// Start starts Dovecot; t.Cleanup stops it.
func Start(t testing.TB, o Options) *Dovecot {
	t.Helper()
	bin := lookDovecot(t)
	if o.Users == nil {
		o.Users = map[string]string{"alice": "secret"}
	}
	if o.SentName == "" {
		o.SentName = "Sent"
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	d := &Dovecot{users: map[string]string{}, uid: os.Geteuid(), gid: os.Getegid()}
	if d.uid == 0 {
		// Dovecot refuses mail access as root: the users are nobody.
		d.uid, d.gid = 65534, 65534
	}
	for u, p := range o.Users {
		d.users[u] = p
	}
	d.dir = daemontest.MakeDir(t, "dovecottest-", "run", "state", "mail")
	d.Addr = daemontest.FreeAddr(t, o.Host)
	var tlsConf string
	if o.TLS {
		tlsConf = d.writeCerts(t, o.Host)
	}
	d.writePasswd(t)
	d.conf = filepath.Join(d.dir, "dovecot.conf")
	if err := os.WriteFile(d.conf, []byte(d.config(o, tlsConf)), 0o644); err != nil {
		t.Fatal(err)
	}
	d.start(t, bin)
	daemontest.WaitListening(t, "dovecot", d.Addr, d.stopped, d.Log)
	return d
}

// lookDovecot returns the dovecot binary, or skips the test (fails it
// under CI) where there is none.
func lookDovecot(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("dovecot")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/dovecot"); serr == nil {
			bin, err = "/usr/sbin/dovecot", nil
		}
	}
	if err != nil {
		daemontest.Missing(t, "dovecot", err, "apt-get install -y dovecot-imapd", "Debian's dovecot-imapd")
	}
	return bin
}

// config is dovecot.conf: plain-text logins allowed (the tests' clients
// are on loopback), Maildir storage under mail/<user>, a Sent folder.
func (d *Dovecot) config(o Options, tlsConf string) string {
	host, port, _ := net.SplitHostPort(d.Addr)
	special := `special_use = \Sent`
	if o.NoSpecialUse {
		special = ""
	}
	listener := fmt.Sprintf("inet_listener imap {\n    address = %s\n    port = %s\n  }\n  inet_listener imaps {\n    port = 0\n  }", host, port)
	ssl := "ssl = no"
	if o.TLS {
		listener = fmt.Sprintf("inet_listener imap {\n    port = 0\n  }\n  inet_listener imaps {\n    address = %s\n    port = %s\n    ssl = yes\n  }", host, port)
		ssl = tlsConf
	}
	lines := []string{
		"base_dir = " + filepath.Join(d.dir, "run"),
		"state_dir = " + filepath.Join(d.dir, "state"),
		"log_path = " + filepath.Join(d.dir, "log"),
		"protocols = imap",
		"listen = " + host,
		ssl,
		"disable_plaintext_auth = no",
		"auth_mechanisms = plain login",
		// A refused login is answered at once and not penalised: the
		// tests refuse logins on purpose, from loopback.
		"auth_failure_delay = 0",
		"login_trusted_networks = 127.0.0.0/8",
		"service anvil {\n  unix_listener anvil-auth-penalty {\n    mode = 0\n  }\n}",
		"mail_location = maildir:~/Maildir",
		"first_valid_uid = 1",
		"mailbox_idle_check_interval = 1 secs",
		"passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u " + d.passwdPath() + "\n}",
		"userdb {\n  driver = passwd-file\n  args = username_format=%u " + d.passwdPath() + "\n}",
		"service imap-login {\n  " + listener + "\n}",
		"namespace inbox {\n  inbox = yes\n  separator = /\n  mailbox \"" + o.SentName + "\" {\n    " + special + "\n    auto = subscribe\n  }\n}",
	}
	if os.Geteuid() != 0 {
		me, err := user.Current()
		if err == nil {
			lines = append(lines, "default_login_user = "+me.Username, "default_internal_user = "+me.Username)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func (d *Dovecot) passwdPath() string { return filepath.Join(d.dir, "passwd") }

// writePasswd writes the passwd-file of d.users (Dovecot reads it again
// when it changes, so a password change needs no restart).
func (d *Dovecot) writePasswd(t testing.TB) {
	t.Helper()
	var b strings.Builder
	for u, p := range d.users {
		home := filepath.Join(d.dir, "mail", u)
		if err := os.MkdirAll(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, d.uid, d.gid); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:{PLAIN}%s:%d:%d::%s::\n", u, p, d.uid, d.gid, home)
	}
	tmp := d.passwdPath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, d.passwdPath()); err != nil {
		t.Fatal(err)
	}
}

// SetPassword changes a user's password; the next login uses it.
func (d *Dovecot) SetPassword(t testing.TB, user, password string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users[user] = password
	d.writePasswd(t)
	// Dovecot's passwd-file looks at the file again at most once per
	// second of its clock: a login in the second of the change could still
	// see the old password. Waiting into the next second is waiting for
	// that condition itself.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
}

// start runs dovecot -F; t.Cleanup stops it and removes its directory
// (showing the log of a failed test first).
func (d *Dovecot) start(t testing.TB, bin string) {
	t.Helper()
	d.cmd = exec.Command(bin, "-F", "-c", d.conf)
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(d.dir)
		t.Fatalf("dovecot: %v", err)
	}
	d.stopped = make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(d.stopped) }()
	daemontest.Cleanup(t, "dovecot", d.dir, func() {
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.stopped:
		case <-time.After(10 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.stopped
		}
	}, d.Log)
}

// Log returns Dovecot's log so far.
func (d *Dovecot) Log() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "log"))
	return string(b)
}

// Port is the listener's port.
func (d *Dovecot) Port() int {
	_, p, _ := net.SplitHostPort(d.Addr)
	n, _ := strconv.Atoi(p)
	return n
}
