package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestHealthcheck_AsksTheServerOnItsListenAddress: the command a container
// HEALTHCHECK runs finds the server from the SENDONCE_ADDR serve listens
// on (a wildcard host asked on loopback) and succeeds on /healthz's 200,
// and fails on any other answer or none.
func TestHealthcheck_AsksTheServerOnItsListenAddress(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(u.Host)
	healthcheck := func(env map[string]string, args ...string) (string, error) {
		var out bytes.Buffer
		err := Run(context.Background(), append([]string{"healthcheck"}, args...), func(k string) string { return env[k] }, &out, io.Discard)
		return out.String(), err
	}

	for _, addr := range []string{"0.0.0.0:" + port, ":" + port, "[::]:" + port, "127.0.0.1:" + port} {
		if out, err := healthcheck(map[string]string{"SENDONCE_ADDR": addr}); err != nil || strings.TrimSpace(out) != "ok" {
			t.Errorf("SENDONCE_ADDR=%s: %q, %v; want ok", addr, out, err)
		}
	}
	// A route that answers, but not 200 (no key: 401).
	if _, err := healthcheck(nil, "--url", env.URL+"/v1/sends"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("--url on a 401 route: %v, want a failure naming 401", err)
	}
	// Nobody listening.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if _, err := healthcheck(map[string]string{"SENDONCE_ADDR": closed}); err == nil {
		t.Errorf("SENDONCE_ADDR=%s (closed): healthcheck succeeded", closed)
	}
	if _, err := healthcheck(map[string]string{"SENDONCE_ADDR": "no-port"}); err == nil {
		t.Error("an address without a port: healthcheck succeeded")
	}
}

// A server listening on every address is asked on loopback: dialling a
// wildcard address works on Linux only.
func TestHealthcheck_URLOfAListenAddress(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8787":   "http://127.0.0.1:8787/healthz",
		":8787":          "http://127.0.0.1:8787/healthz",
		"[::]:8787":      "http://127.0.0.1:8787/healthz",
		"10.1.2.3:80":    "http://10.1.2.3:80/healthz",
		"[::1]:8787":     "http://[::1]:8787/healthz",
		"localhost:8787": "http://localhost:8787/healthz",
	} {
		if got, err := healthURL(addr); err != nil || got != want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}
