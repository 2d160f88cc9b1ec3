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
// Without node or the installed package it skips, or fails when CI is set.
func Start(t testing.TB) *Emulator {
	t.Helper()
	Require(t)
	e, stop, err := Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return e
}

// Require skips the test, saying how to install the emulator, when it
// cannot run (Installed); under CI, which installs it, it fails instead.
// Tests that run it in another process (the soak) call it first.
func Require(t testing.TB) {
	t.Helper()
	if err := Installed(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the SES emulator cannot run: %v (.ci/run installs it: npm ci --prefix internal/testkit/seslocal/testdata/ses-local)", err)
		}
		t.Skipf("needs node and `npm ci --prefix internal/testkit/seslocal/testdata/ses-local`: %v", err)
	}
}

// Installed says why the emulator cannot run (no node, or the package not
// installed), or nil.
func Installed() error {
	if _, err := exec.LookPath("node"); err != nil {
		return err
	}
	_, err := os.Stat(cliPath())
	return err
}

func cliPath() string {
	return filepath.Join(Dir(), "node_modules", "aws-ses-v2-local", "dist", "cli.js")
}

// Run starts an emulator on a free loopback port and waits (up to 20s)
// until it answers; stop ends it. It needs no *testing.T, so tools (the
// soak of cmd/sendonce-bench) can run it too.
func Run() (e *Emulator, stop func(), err error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, fmt.Errorf("the SES emulator needs node: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, cliPath(), "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "SMTP_TRANSPORT=")
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("start the SES emulator: %w", err)
	}
	stop = func() {
		cancel()
		_ = cmd.Wait()
	}
	e = &Emulator{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(e.URL + "/health-check")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return e, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("the SES emulator did not answer on %s: %v", e.URL, err)
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
	emails, err := e.Store(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return emails
}

// Store lists what the emulator took (its store keeps the parsed message:
// no headers, no email tags).
func (e *Emulator) Store(ctx context.Context) ([]Email, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/store", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the SES emulator's store: %w", err)
	}
	defer resp.Body.Close()
	var st struct{ Emails []Email }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("read the SES emulator's store: %w", err)
	}
	return st.Emails, nil
}
