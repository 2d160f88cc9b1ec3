// Package seslocal runs aws-ses-v2-local (npm), a local Amazon SES v2
// emulator, for the ses transport's tests: the official AWS SDK for Go v2
// talks to it as to SES, and its /store lists what it took.
//
// .ci/run installs it:
//
//	npm ci --prefix internal/testkit/seslocal/testdata/ses-local --no-audit --no-fund
//
// Without node or the installed package a test skips, and fails when CI is
// set.
package seslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Dir is the npm project (package.json, package-lock.json).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "ses-local")
}

// Emulator is a running aws-ses-v2-local.
type Emulator struct {
	URL string // http://127.0.0.1:PORT
}

// Start starts an emulator on a free loopback port; t.Cleanup stops it.
func Start(t testing.TB) *Emulator {
	t.Helper()
	node, err := exec.LookPath("node")
	cli := filepath.Join(Dir(), "node_modules", "aws-ses-v2-local", "dist", "cli.js")
	if err == nil {
		_, err = os.Stat(cli)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the SES emulator cannot run: %v (.ci/run installs it: npm ci --prefix internal/testkit/seslocal/testdata/ses-local)", err)
		}
		t.Skipf("needs node and `npm ci --prefix internal/testkit/seslocal/testdata/ses-local`: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, cli, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "SMTP_TRANSPORT=")
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start the SES emulator: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	e := &Emulator{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(e.URL + "/health-check")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SES emulator did not answer on %s: %v", e.URL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Email is one message the emulator took (parsed by it).
type Email struct {
	MessageID   string `json:"messageId"`
	From        string `json:"from"`
	Subject     string `json:"subject"`
	Destination struct {
		To, Cc, Bcc []string
	} `json:"destination"`
	Body struct {
		Text string `json:"text"`
		HTML string `json:"html"`
	} `json:"body"`
}

// Emails lists what the emulator took.
func (e *Emulator) Emails(t testing.TB) []Email {
	t.Helper()
	resp, err := http.Get(e.URL + "/store")
	if err != nil {
		t.Fatalf("read the SES emulator's store: %v", err)
	}
	defer resp.Body.Close()
	var st struct{ Emails []Email }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("read the SES emulator's store: %v", err)
	}
	return st.Emails
}
