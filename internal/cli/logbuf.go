package cli

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/accesslog"
)

// logFlushEvery bounds how long a buffered log line waits to be written.
const logFlushEvery = 100 * time.Millisecond

// bufferedLog batches the server's log lines: one write per request line
// was a system call per request. Lines reach the output within
// logFlushEvery, at once for warnings and errors (see flushOnWarn), and on
// close. A process killed outright loses at most the last logFlushEvery of
// info lines.
type bufferedLog struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

func newBufferedLog(w io.Writer) *bufferedLog {
	b := &bufferedLog{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		t := time.NewTicker(logFlushEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.Flush()
			case <-b.stop:
				b.Flush()
				return
			}
		}
	}()
	return b
}

func (b *bufferedLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Write(p)
}

// Flush writes what is buffered.
func (b *bufferedLog) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.w.Flush()
}

// Close flushes and stops the flusher.
func (b *bufferedLog) Close() {
	close(b.stop)
	<-b.done
}

// flushOnWarn writes warnings and errors through at once.
type flushOnWarn struct {
	slog.Handler
	b *bufferedLog
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.b.Flush()
	}
	return err
}

func (h flushOnWarn) WithAttrs(as []slog.Attr) slog.Handler {
	return flushOnWarn{Handler: h.Handler.WithAttrs(as), b: h.b}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{Handler: h.Handler.WithGroup(name), b: h.b}
}

// flushOnServerError writes an access line through at once when the answer
// was a 5xx: like a warning, it is a line an operator needs even if the
// process is killed right after.
type flushOnServerError struct {
	accesslog.Logger
	b *bufferedLog
}

func (f flushOnServerError) Log(ctx context.Context, l accesslog.Line) {
	f.Logger.Log(ctx, l)
	if l.Status >= 500 {
		f.b.Flush()
	}
}
