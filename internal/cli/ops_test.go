package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServe_OpsAddrGivesAWorkerProbesAndMetrics: a worker serves no API,
// but with --ops-addr its probes and Prometheus have /healthz, /readyz and
// /metrics there (and nothing else); it goes away when the process stops.
func TestServe_OpsAddrGivesAWorkerProbesAndMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	db := "sqlite:" + filepath.Join(t.TempDir(), "sendonce.db")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--role", "worker", "--ops-addr", addr, "--db", db}, func(string) string { return "" }, io.Discard, io.Discard)
	}()
	c := &http.Client{Timeout: 5 * time.Second}
	ask := func(path string) (int, string) {
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _ := ask("/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker's --ops-addr never answered /readyz 200")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := ask("/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := ask("/metrics"); code != http.StatusOK || !strings.Contains(body, "sendonce_") {
		t.Errorf("/metrics: %d, no sendonce_ metrics", code)
	}
	if code, _ := ask("/v1/sends"); code != http.StatusNotFound {
		t.Errorf("/v1/sends on the ops listener: %d, want 404 (the ops listener serves no API)", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not stop")
	}
	if code, _ := ask("/healthz"); code != 0 {
		t.Errorf("/healthz after the stop: %d, want the listener closed", code)
	}
}
