package certs_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/certs"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// handshake makes a TLS handshake against cfg over a pipe and returns the
// serial of the certificate the server presented.
func handshake(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	sc, cc := net.Pipe()
	srv := tls.Server(sc, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	cli := tls.Client(cc, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test compares the presented certificate itself
	if err := cli.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	serial := cli.ConnectionState().PeerCertificates[0].SerialNumber.String()
	// The pipe's ends, not the TLS conns: a TLS Close writes close_notify,
	// which an unread pipe holds for its 5-second deadline.
	cc.Close()
	sc.Close()
	return serial
}

func serialOf(c *tls.Config) string { return c.Certificates[0].Leaf.SerialNumber.String() }

// TestPair_ReloadServesTheNewCertificateAndKeepsTheOldOnFailure: a reload
// changes what the next handshake gets; a reload that fails, for each
// class of failure, keeps the certificate that served before and says
// which file and class, and the log holds no PEM.
func TestPair_ReloadServesTheNewCertificateAndKeepsTheOldOnFailure(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a, _ := smtptest.SelfSignedTLS(t)
	b, _ := smtptest.SelfSignedTLS(t)
	smtptest.WritePEM(t, certFile, keyFile, a)
	p, err := certs.Load("smtp", certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.ServerConfig()
	if got := handshake(t, cfg); got != serialOf(a) {
		t.Fatalf("first handshake got serial %s, want A's %s", got, serialOf(a))
	}
	smtptest.WritePEM(t, certFile, keyFile, b)
	var logs bytes.Buffer
	if n := (certs.Set{p}).Reload(slog.New(slog.NewTextHandler(&logs, nil))); n != 0 {
		t.Fatalf("reload of B: %d failed\n%s", n, logs.String())
	}
	if got := handshake(t, cfg); got != serialOf(b) {
		t.Fatalf("after the reload got serial %s, want B's %s", got, serialOf(b))
	}

	keyB, _ := os.ReadFile(keyFile)
	otherDir := t.TempDir()
	smtptest.WritePEM(t, filepath.Join(otherDir, "a.crt"), filepath.Join(otherDir, "a.key"), a)
	keyA, _ := os.ReadFile(filepath.Join(otherDir, "a.key"))
	for _, c := range []struct {
		name, class, file string
		write             func()
	}{
		{"key missing", certs.ClassUnreadable, keyFile, func() { os.Remove(keyFile) }},
		{"certificate not PEM", certs.ClassInvalidCertificate, certFile, func() { os.WriteFile(certFile, []byte("not a certificate\n"), 0o600) }},
		{"key of another certificate", certs.ClassInvalidKey, keyFile, func() { os.WriteFile(keyFile, keyA, 0o600) }},
		{"key truncated", certs.ClassInvalidKey, keyFile, func() { os.WriteFile(keyFile, keyB[:len(keyB)/2], 0o600) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			smtptest.WritePEM(t, certFile, keyFile, b)
			c.write()
			logs.Reset()
			if n := (certs.Set{p}).Reload(slog.New(slog.NewTextHandler(&logs, nil))); n != 1 {
				t.Fatalf("reload: %d failed, want 1\n%s", n, logs.String())
			}
			err := p.Reload()
			var le *certs.LoadError
			if !errors.As(err, &le) || le.Class != c.class || le.File != c.file {
				t.Fatalf("Reload: %v, want a LoadError of class %s on %s", err, c.class, c.file)
			}
			if c.class == certs.ClassUnreadable && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Reload: %v does not unwrap to fs.ErrNotExist", err)
			}
			line := logs.String()
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "class="+c.class) || !strings.Contains(line, c.file) || strings.Contains(line, "PRIVATE") {
				t.Errorf("log %q: want a WARN naming the file and class, and no PEM", line)
			}
			if got := handshake(t, cfg); got != serialOf(b) {
				t.Fatalf("after the failed reload got serial %s, want B's %s still", got, serialOf(b))
			}
		})
	}
}
