// Package accesslog writes the HTTP API's one line per request.
//
// The line is an ordinary log record (message "request", level INFO) and
// reads exactly as log/slog's text or JSON handler would write it, so log
// tooling sees one format. It is written here rather than through slog
// because a replay is answered in a few microseconds and slog's generic
// attribute path (a Record, its attribute slice, a kind switch and a
// quoting scan per value) was about a tenth of the process's CPU on the
// replay benchmark (docs/performance.md).
package accesslog

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Line is one request's entry: never a header value, a secret or a body.
type Line struct {
	Time     time.Time
	Method   string
	Route    string // the matched pattern, "POST /v1/send"
	Path     string
	Status   int
	Duration time.Duration
	Key      string // the API key's fingerprint, "" before authentication
	Replayed bool
}

// Logger takes the lines.
type Logger interface {
	Log(ctx context.Context, l Line)
}

// Slog logs each line through a slog.Logger: any handler, its level and
// attributes. The general path, for tests and embedders.
type Slog struct{ L *slog.Logger }

// Log implements Logger.
func (s Slog) Log(ctx context.Context, l Line) {
	if !s.L.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(l.Time, slog.LevelInfo, "request", 0)
	r.AddAttrs(l.attrs()...)
	_ = s.L.Handler().Handle(ctx, r)
}

func (l Line) attrs() []slog.Attr {
	return []slog.Attr{
		slog.String("method", l.Method), slog.String("route", l.Route), slog.String("path", l.Path),
		slog.Int("status", l.Status), slog.Duration("duration", l.Duration),
		slog.String("key", l.Key), slog.Bool("replayed", l.Replayed),
	}
}

// Direct writes the lines itself to w, as slog.NewTextHandler (or, with
// json, slog.NewJSONHandler) with no attributes or groups added would.
// A line with a string outside the plain set (see plain) goes through
// Fallback instead, so the output never differs from slog's. w must be
// safe for concurrent writes of whole lines (the server's log buffer is).
type Direct struct {
	W        io.Writer
	JSON     bool
	Fallback Logger
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// Log implements Logger.
func (d Direct) Log(ctx context.Context, l Line) {
	if !plain(l.Method) || !plain(l.Route) || !plain(l.Path) || !plain(l.Key) {
		d.Fallback.Log(ctx, l)
		return
	}
	bp := bufs.Get().(*[]byte)
	b := (*bp)[:0]
	if d.JSON {
		b = appendJSON(b, l)
	} else {
		b = appendText(b, l)
	}
	_, _ = d.W.Write(b)
	*bp = b
	bufs.Put(bp)
}

// plain reports whether s is printable ASCII with no '"' or '\\': such a
// string is written as it is by slog's JSON handler, and by its text
// handler bare or, holding a space or '=', in plain double quotes.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func appendText(b []byte, l Line) []byte {
	b = append(b, "time="...)
	b = appendRFC3339Millis(b, l.Time)
	b = append(b, " level=INFO msg=request method="...)
	b = appendTextString(b, l.Method)
	b = append(b, " route="...)
	b = appendTextString(b, l.Route)
	b = append(b, " path="...)
	b = appendTextString(b, l.Path)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, " duration="...)
	b = append(b, l.Duration.String()...)
	b = append(b, " key="...)
	b = appendTextString(b, l.Key)
	b = append(b, " replayed="...)
	b = strconv.AppendBool(b, l.Replayed)
	return append(b, '\n')
}

// appendTextString writes a plain string as slog's text handler does:
// quoted when empty or holding a space or '='.
func appendTextString(b []byte, s string) []byte {
	quote := s == ""
	for i := 0; i < len(s) && !quote; i++ {
		quote = s[i] == ' ' || s[i] == '='
	}
	if !quote {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendRFC3339Millis is slog's text handler's time: RFC 3339 with exactly
// three digits of milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}

func appendJSON(b []byte, l Line) []byte {
	b = append(b, `{"time":"`...)
	b = l.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","method":"`...)
	b = append(b, l.Method...)
	b = append(b, `","route":"`...)
	b = append(b, l.Route...)
	b = append(b, `","path":"`...)
	b = append(b, l.Path...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(l.Duration), 10)
	b = append(b, `,"key":"`...)
	b = append(b, l.Key...)
	b = append(b, `","replayed":`...)
	b = strconv.AppendBool(b, l.Replayed)
	return append(b, "}\n"...)
}
