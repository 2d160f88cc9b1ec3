package accesslog

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/syncbuf"
)

// viaSlog is what slog's own handler writes for the line.
func viaSlog(l Line, json bool) string {
	var b bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&b, nil)
	if json {
		h = slog.NewJSONHandler(&b, nil)
	}
	Slog{L: slog.New(h)}.Log(context.Background(), l)
	return b.String()
}

// direct is what Direct writes, its fallback being slog's handler on the
// same buffer.
func direct(l Line, json bool) string {
	var b bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&b, nil)
	if json {
		h = slog.NewJSONHandler(&b, nil)
	}
	Direct{W: &b, JSON: json, Fallback: Slog{L: slog.New(h)}}.Log(context.Background(), l)
	return b.String()
}

func sample() Line {
	return Line{Time: time.Date(2026, 12, 2, 11, 53, 47, 120_000_000, time.UTC), Method: "POST", Route: "POST /v1/send",
		Path: "/v1/send", Status: 200, Duration: 1234567 * time.Nanosecond, Key: "k_3f2a", Replayed: true}
}

func TestDirect_ReadsAsSlogWritesIt(t *testing.T) {
	cases := map[string]func(*Line){
		"replay":            func(*Line) {},
		"unauthenticated":   func(l *Line) { l.Key, l.Status, l.Replayed = "", 401, false },
		"no route":          func(l *Line) { l.Route = "" },
		"equals in path":    func(l *Line) { l.Path = "/v1/sends/a=b" },
		"quote in path":     func(l *Line) { l.Path = `/v1/"x"` },
		"backslash in path": func(l *Line) { l.Path = `/v1/\x` },
		"unicode in path":   func(l *Line) { l.Path = "/v1/sends/é\u2028" },
		"control in path":   func(l *Line) { l.Path = "/v1/\x01\n" },
		"html in path":      func(l *Line) { l.Path = "/v1/<a>&" },
		"whole second":      func(l *Line) { l.Time = l.Time.Truncate(time.Second) },
		"local time":        func(l *Line) { l.Time = l.Time.In(time.FixedZone("x", 5*3600+1800)) },
		"long duration":     func(l *Line) { l.Duration = 3*time.Minute + 7*time.Millisecond },
		"zero duration":     func(l *Line) { l.Duration = 0 },
	}
	for name, change := range cases {
		l := sample()
		change(&l)
		for _, json := range []bool{false, true} {
			if got, want := direct(l, json), viaSlog(l, json); got != want {
				t.Errorf("%s (json %v):\n got %q\nwant %q", name, json, got, want)
			}
		}
	}
}

// FuzzDirect_ReadsAsSlogWritesIt: whatever the strings, the line is slog's.
func FuzzDirect_ReadsAsSlogWritesIt(f *testing.F) {
	f.Add("POST", "POST /v1/send", "/v1/send", "k", int64(1234567), int64(1764676427120000000))
	f.Add("GET", "", "/v1/a=b c", "", int64(0), int64(0))
	f.Add("x\"", "\\", "\u2028é", "\xff", int64(-1), int64(1))
	f.Fuzz(func(t *testing.T, method, route, path, key string, dur, unixNano int64) {
		l := Line{Time: time.Unix(0, unixNano).UTC(), Method: method, Route: route, Path: path, Status: 200,
			Duration: time.Duration(dur), Key: key}
		if y := l.Time.Year(); y < 1000 || y > 9999 {
			return // slog itself writes an error for years outside RFC 3339's four digits
		}
		for _, json := range []bool{false, true} {
			if got, want := direct(l, json), viaSlog(l, json); got != want {
				t.Fatalf("json %v:\n got %q\nwant %q", json, got, want)
			}
		}
	})
}

func TestDirect_ConcurrentLinesStayWhole(t *testing.T) {
	var out syncbuf.Buffer // stands for the server's log buffer, which takes whole lines from many goroutines
	d := Direct{W: &out, Fallback: Slog{L: slog.New(slog.NewTextHandler(&out, nil))}}
	want := direct(sample(), false)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				d.Log(context.Background(), sample())
			}
		}()
	}
	wg.Wait()
	lines := bytes.SplitAfter([]byte(out.String()), []byte("\n"))
	if len(lines) != 8*200+1 {
		t.Fatalf("%d lines, want %d", len(lines)-1, 8*200)
	}
	for _, l := range lines[:len(lines)-1] {
		if string(l) != want {
			t.Fatalf("line %q, want %q", l, want)
		}
	}
}

func BenchmarkAccessLine(b *testing.B) {
	var sink bytes.Buffer
	l := sample()
	b.Run("slog", func(b *testing.B) {
		s := Slog{L: slog.New(slog.NewTextHandler(&sink, nil))}
		for b.Loop() {
			sink.Reset()
			s.Log(context.Background(), l)
		}
	})
	b.Run("direct", func(b *testing.B) {
		d := Direct{W: &sink}
		for b.Loop() {
			sink.Reset()
			d.Log(context.Background(), l)
		}
	})
}
