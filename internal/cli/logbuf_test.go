package cli

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Info lines are batched but written within logFlushEvery; warnings are
// written at once; Close writes what is left.
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
