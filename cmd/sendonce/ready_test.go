package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// probe asks path on a fresh connection (as a load balancer's probe
// does), returning the status and the JSON body, or the error when the
// listener refused it.
func probe(url, path string) (int, map[string]string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, nil
}

// waitReady polls /readyz until 200: "listening" is logged before the
// process's other listeners are bound.
func waitReady(t *testing.T, p *proc) {
	t.Helper()
	waitFor(t, 30*time.Second, "/readyz 200", func() bool {
		code, _, err := probe(p.url, "/readyz")
		return err == nil && code == http.StatusOK
	})
}

// waitExit waits up to wait for the process to end and returns its error.
func waitExit(t *testing.T, p *proc, wait time.Duration) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.cmd.Wait() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(wait):
		t.Fatalf("still running %v after the second SIGTERM:\n%s", wait, p.logText())
		return nil
	}
}

// TestServe_ReadyzDrainsAfterSIGTERM: after SIGTERM /readyz answers 503
// "draining" at once while the listener keeps answering new connections
// (a load balancer sees the 503 before connections are refused); a second
// SIGTERM cuts the drain delay short and the process stops cleanly.
func TestServe_ReadyzDrainsAfterSIGTERM(t *testing.T) {
	binaryTest(t)
	db := sqliteDB(t)
	p := startServe(t, "--db", db, "--drain-delay", "10m")
	waitReady(t, p)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The signal is handled asynchronously: until then the answer is 200,
	// after it 503 draining; never a refused connection.
	waitFor(t, 10*time.Second, "/readyz 503 draining", func() bool {
		code, body, err := probe(p.url, "/readyz")
		if err != nil {
			t.Fatalf("/readyz after SIGTERM: %v; the listener must keep serving while draining\n%s", err, p.logText())
		}
		if code == http.StatusOK {
			return false
		}
		if code != http.StatusServiceUnavailable || body["status"] != "not_ready" || body["reason"] != "draining" {
			t.Fatalf("/readyz after SIGTERM: %d %v, want 503 not_ready draining", code, body)
		}
		return true
	})
	time.Sleep(300 * time.Millisecond) // a load balancer's next probes come later still
	for _, path := range []string{"/readyz", "/healthz"} {
		code, body, err := probe(p.url, path)
		if err != nil {
			t.Fatalf("%s while draining: %v; the listener must keep serving\n%s", path, err, p.logText())
		}
		if want := map[string]int{"/readyz": 503, "/healthz": 200}[path]; code != want {
			t.Fatalf("%s while draining: %d %v, want %d", path, code, body, want)
		}
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, p, 30*time.Second); err != nil {
		t.Fatalf("exit after the second SIGTERM: %v\n%s", err, p.logText())
	}
	if logs := p.logText(); !strings.Contains(logs, "draining cut short") || !strings.Contains(logs, "msg=stopped") {
		t.Errorf("log lacks the cut-short drain or the stop:\n%s", logs)
	}
}

// serialOver makes a new STARTTLS handshake with addr and returns the
// serial of the certificate it presented, trusting roots only.
func serialOver(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	c, err := smtp.DialStartTLS(addr, &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("STARTTLS with %s: %v", addr, err)
	}
	defer c.Close()
	if err := c.Noop(); err != nil { // the handshake happens on first use
		t.Fatalf("%s: NOOP after STARTTLS: %v", addr, err)
	}
	st, ok := c.TLSConnectionState()
	if !ok {
		t.Fatalf("%s: no TLS after STARTTLS", addr)
	}
	return st.PeerCertificates[0].SerialNumber.String()
}

// TestServe_SIGHUPReloadsListenerCertificates: the process starts with
// certificate A on submission's and the inbound listener's STARTTLS; the
// files are replaced by B and SIGHUP sent: new handshakes on both see B,
// in the same process, and a session opened in TLS under A goes on. Then
// a broken key file and SIGHUP: handshakes still see B, and the log says
// which file failed and how.
func TestServe_SIGHUPReloadsListenerCertificates(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a, _ := smtptest.SelfSignedTLS(t)
	b, _ := smtptest.SelfSignedTLS(t)
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificates[0].Leaf)
	roots.AddCert(b.Certificates[0].Leaf)
	serialA, serialB := a.Certificates[0].Leaf.SerialNumber.String(), b.Certificates[0].Leaf.SerialNumber.String()
	smtptest.WritePEM(t, certFile, keyFile, a)

	db := "sqlite:" + filepath.Join(dir, "sendonce.db")
	p := startServe(t, "--db", db, "--smtp-addr", "127.0.0.1:0", "--smtp-tls-cert", certFile, "--smtp-tls-key", keyFile,
		"--inbound-addr", "127.0.0.1:0", "--inbound-tls-cert", certFile, "--inbound-tls-key", keyFile)
	waitReady(t, p)
	submission, inbound := p.smtpAddr(t), p.inboundAddr(t)
	pid := p.cmd.Process.Pid
	for _, addr := range []string{submission, inbound} {
		if got := serialOver(t, addr, roots); got != serialA {
			t.Fatalf("%s before SIGHUP: serial %s, want A's %s", addr, got, serialA)
		}
	}
	open, err := smtp.DialStartTLS(submission, &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.Noop(); err != nil {
		t.Fatal(err)
	}

	hangup := func(wantLines int, msg string) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, msg+" logged for both listeners", func() bool {
			return strings.Count(p.logText(), msg) >= wantLines
		})
	}
	smtptest.WritePEM(t, certFile, keyFile, b)
	hangup(2, `msg="certificate reloaded"`)
	for _, addr := range []string{submission, inbound} {
		if got := serialOver(t, addr, roots); got != serialB {
			t.Fatalf("%s after SIGHUP: serial %s, want B's %s", addr, got, serialB)
		}
	}
	if err := open.Noop(); err != nil {
		t.Fatalf("the session opened under A, after SIGHUP: %v", err)
	}
	if st, _ := open.TLSConnectionState(); st.PeerCertificates[0].SerialNumber.String() != serialA {
		t.Fatal("the session opened under A changed certificate")
	}

	if err := os.WriteFile(keyFile, []byte("-----BEGIN PRIVATE KEY-----\nbroken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangup(2, `msg="certificate reload failed, keeping the loaded one"`)
	for _, addr := range []string{submission, inbound} {
		if got := serialOver(t, addr, roots); got != serialB {
			t.Fatalf("%s after a failed reload: serial %s, want B's %s still", addr, got, serialB)
		}
	}
	if logs := p.logText(); !strings.Contains(logs, "file="+keyFile+" class=invalid_key") || strings.Contains(logs, "broken") {
		t.Errorf("the failed reload's log lines should name the key file and class invalid_key, and not quote it:\n%s", logs)
	}
	if err := open.Noop(); err != nil {
		t.Fatalf("the session opened under A, after the failed reload: %v", err)
	}
	if p.cmd.ProcessState != nil || p.cmd.Process.Pid != pid {
		t.Fatalf("the process did not survive SIGHUP:\n%s", p.logText())
	}
	if code, _, err := probe(p.url, "/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz after the reloads: %d %v", code, err)
	}
}
