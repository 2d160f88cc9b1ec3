package cli

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/accesslog"
)

// lockedBuf is the log's output; it counts the writes it gets, so that a
// test can tell batched lines from a write per line.
type lockedBuf struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuf) Writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Info lines are batched: many lines logged at once reach the output in
// a write per flush, not a write per line.
func TestBufferedLog_BatchesInfoLines(t *testing.T) {
	out := &lockedBuf{}
	b := newBufferedLog(out)
	defer b.Close()
	logger := slog.New(flushOnWarn{Handler: slog.NewTextHandler(b, nil), b: b})

	const lines = 200
	start := time.Now()
	for i := range lines {
		logger.Info("line", "n", i)
	}
	// The flusher ticks every logFlushEvery: at most one write per tick
	// in the time the lines took, and one for a tick that came after.
	ticks := int(time.Since(start)/logFlushEvery) + 1
	if w := out.Writes(); w > ticks {
		t.Fatalf("%d lines made %d writes in %d flush periods; want at most %d (batched)", lines, w, ticks, ticks)
	}
	deadline := time.Now().Add(10 * logFlushEvery)
	for strings.Count(out.String(), "msg=line") < lines {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d info lines written within %s", strings.Count(out.String(), "msg=line"), lines, 10*logFlushEvery)
		}
		time.Sleep(logFlushEvery / 4)
	}
	if w := out.Writes(); w >= lines/2 {
		t.Fatalf("%d lines made %d writes, want far fewer", lines, w)
	}
}

// Info lines wait for the flusher, but are written within logFlushEvery;
// warnings are written at once, with what was waiting; Close writes what
// is left.
func TestBufferedLog(t *testing.T) {
	out := &lockedBuf{}
	b := newBufferedLog(out)
	logger := slog.New(flushOnWarn{Handler: slog.NewTextHandler(b, nil), b: b})

	logger.Info("first")
	logger.Warn("trouble")
	if s := out.String(); !strings.Contains(s, "first") || !strings.Contains(s, "trouble") {
		t.Fatalf("after a warning the log holds %q, want both lines", s)
	}
	logger.Info("second")
	deadline := time.Now().Add(10 * logFlushEvery)
	for !strings.Contains(out.String(), "second") {
		if time.Now().After(deadline) {
			t.Fatalf("an info line was not written within %s", 10*logFlushEvery)
		}
		time.Sleep(logFlushEvery / 4)
	}
	logger.With("k", "v").Info("last")
	b.Close()
	if !strings.Contains(out.String(), "last") {
		t.Fatal("Close did not write the last line")
	}
}

// An access line for a 5xx answer is written at once, with what was
// waiting; other access lines wait for the flusher.
func TestAccessLog_ServerErrorsAtOnce(t *testing.T) {
	out := &lockedBuf{}
	b := newBufferedLog(out)
	defer b.Close()
	logger := slog.New(flushOnWarn{Handler: slog.NewTextHandler(b, nil), b: b})
	al := accessLog(logger, b, "text", 1)
	ctx := t.Context()
	al.Log(ctx, accesslog.Line{Time: time.Now(), Method: "GET", Route: "GET /v1/sends", Path: "/v1/sends", Status: 200})
	al.Log(ctx, accesslog.Line{Time: time.Now(), Method: "POST", Route: "POST /v1/send", Path: "/v1/send", Status: 503})
	if s := out.String(); !strings.Contains(s, "status=503") || !strings.Contains(s, "status=200") {
		t.Fatalf("after a 503 the log holds %q, want both lines", s)
	}
}

// --access-log-sample 10 writes one in ten access lines of answers below
// 400 and every error line, in the server's own format; a sample below 1
// is refused at start.
func TestAccessLog_Sampled(t *testing.T) {
	out := &lockedBuf{}
	b := newBufferedLog(out)
	logger := slog.New(flushOnWarn{Handler: slog.NewTextHandler(b, nil), b: b})
	al := accessLog(logger, b, "text", 10)
	for range 30 {
		al.Log(t.Context(), accesslog.Line{Time: time.Now(), Method: "POST", Route: "POST /v1/send", Path: "/v1/send", Status: 200, Replayed: true})
		al.Log(t.Context(), accesslog.Line{Time: time.Now(), Method: "POST", Route: "POST /v1/send", Path: "/v1/send", Status: 409})
	}
	b.Close()
	if ok, conflicts := strings.Count(out.String(), "status=200"), strings.Count(out.String(), "status=409"); ok != 3 || conflicts != 30 {
		t.Fatalf("wrote %d lines of 200 and %d of 409, want 3 and 30", ok, conflicts)
	}
	cfg, _, err := parseServe([]string{"--access-log-sample", "0"}, func(string) string { return "" }, io.Discard)
	if err == nil {
		t.Fatalf("--access-log-sample 0 was taken: %+v", cfg.AccessLogSample)
	}
}
