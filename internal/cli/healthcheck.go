package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// runHealthcheck asks a running server's /healthz and succeeds only on
// 200. Container images hold no shell and no curl, so their HEALTHCHECK
// runs the binary itself; it reads the same SENDONCE_ADDR as serve, so
// one variable sets both.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("healthcheck", getenv, stderr)
	var addr, target string
	var timeout time.Duration
	e.str(&addr, "addr", "SENDONCE_ADDR", DefaultAddr, "the server's HTTP listen address; a wildcard host is asked on loopback")
	e.fs.StringVar(&target, "url", "", "the URL to ask instead (default: http://ADDR/healthz)")
	e.fs.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	if err := parse(e, args); err != nil {
		return err
	}
	if target == "" {
		u, err := healthURL(addr)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		target = u
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("%w: --url: %v", ErrUsage, err)
	}
	// No proxy: the server asked is this host's (or the one --url names).
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", target, resp.Status)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// healthURL is /healthz on a listen address. A server listening on every
// address (":8787", "0.0.0.0:8787", "[::]:8787") answers on loopback.
func healthURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/healthz"}).String(), nil
}
