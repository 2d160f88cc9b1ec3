package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestPprof_FlagAndEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"off by default", nil, nil, ""},
		{"flag", []string{"--pprof", "127.0.0.1:0"}, nil, "127.0.0.1:0"},
		{"env", nil, map[string]string{"SENDONCE_PPROF": "127.0.0.1:6060"}, "127.0.0.1:6060"},
		{"flag wins", []string{"--pprof", "127.0.0.1:7070"}, map[string]string{"SENDONCE_PPROF": "127.0.0.1:6060"}, "127.0.0.1:7070"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFlags("serve", func(k string) string { return tc.env[k] }, io.Discard)
			var cfg Config
			serverFlags(e, &cfg)
			if err := parse(e, tc.args); err != nil {
				t.Fatal(err)
			}
			if cfg.Pprof != tc.want {
				t.Fatalf("Pprof = %q, want %q", cfg.Pprof, tc.want)
			}
		})
	}
}

func TestPprof_ServesIndex(t *testing.T) {
	ts := httptest.NewServer(pprofHandler())
	defer ts.Close()
	body := get(t, ts.URL+"/debug/pprof/")
	if !strings.Contains(body, "goroutine") || !strings.Contains(body, "heap") {
		t.Fatalf("index does not list the profiles:\n%s", body)
	}
	if body := get(t, ts.URL+"/debug/pprof/goroutine?debug=1"); !strings.Contains(body, "goroutine profile") {
		t.Fatalf("goroutine profile:\n%.300s", body)
	}
}

// startPprof serves the profiles on the address it logs, and its stop
// closes the listener: nothing answers there afterwards.
func TestPprof_StartStop(t *testing.T) {
	var logged bytes.Buffer
	stop, err := startPprof("127.0.0.1:0", slog.New(slog.NewJSONHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Addr string `json:"pprof_addr"`
	}
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil || line.Addr == "" {
		t.Fatalf("log %q names no pprof_addr (%v)", logged.String(), err)
	}
	if body := get(t, "http://"+line.Addr+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
		t.Fatalf("index before stop:\n%s", body)
	}
	stop()
	if conn, err := net.DialTimeout("tcp", line.Addr, 5*time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after stop", line.Addr)
	}
	if _, err := startPprof("127.0.0.1:notaport", slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a bad address should fail")
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return string(b)
}
