package inmail

import (
	"bytes"
	"errors"
	"net/mail"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestHeaderSize_Bounds(t *testing.T) {
	fields := func(n int) string { return strings.Repeat("A:b\r\n", n) }
	for _, c := range []struct {
		name, raw string
		want      int // -1: ErrHeaderTooLarge
	}{
		{"ends at the blank line", "A: b\r\n c\r\n\r\nbody\r\n\r\n", len("A: b\r\n c\r\n\r\n")},
		{"bare LF", "A: b\n\nbody", len("A: b\n\n")},
		{"no body", "A: b\r\n", len("A: b\r\n")},
		{"empty", "", 0},
		{"1,000 fields", fields(MaxHeaderFields) + "\r\nx", len(fields(MaxHeaderFields)) + 2},
		{"1,001 fields", fields(MaxHeaderFields+1) + "\r\nx", -1},
		{"1,001 fields without a body", fields(MaxHeaderFields + 1), -1},
		{"continuations are not fields", "A: b\r\n" + strings.Repeat(" c\r\n", 5000) + "\r\n", len("A: b\r\n") + 5000*4 + 2},
		{"1 MiB", "A: " + strings.Repeat("x", MaxHeaderBytes-5) + "\r\n\r\n", MaxHeaderBytes + 2},
		{"past 1 MiB in continuations", "A: b\r\n" + strings.Repeat(" "+strings.Repeat("x", 1000)+"\r\n", 1100) + "\r\n", -1},
		{"past 1 MiB in one line", "A: " + strings.Repeat("x", MaxHeaderBytes) + "\r\n\r\n", -1},
	} {
		n, err := HeaderSize([]byte(c.raw))
		if c.want < 0 {
			if !errors.Is(err, ErrHeaderTooLarge) {
				t.Errorf("%s: %d %v, want ErrHeaderTooLarge", c.name, n, err)
			}
			continue
		}
		if err != nil || n != c.want {
			t.Errorf("%s: %d %v, want %d", c.name, n, err, c.want)
		}
	}
}

// TestParse_RefusesAHeaderBombBeforeReadingIt: Parse (every received
// message's path, IMAP's too) refuses a header of 2 million short fields
// with ErrHeaderTooLarge, allocating a small part of the message's size;
// go-message read every field first (about ten times the message).
func TestParse_RefusesAHeaderBombBeforeReadingIt(t *testing.T) {
	raw := []byte(strings.Repeat("A:b\r\n", 2<<20) + "\r\nbody\r\n")
	parseRefusesCheaply(t, raw, "a header bomb", "header")
}

// parseRefusesCheaply fails t unless Parse refuses raw with
// ErrHeaderTooLarge, allocating at most 1 MiB for it; bomb and header
// name what raw holds in the failures.
func parseRefusesCheaply(t *testing.T, raw []byte, bomb, header string) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse(raw)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("Parse of %s: %v, want ErrHeaderTooLarge", bomb, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("Parse allocated %d bytes refusing a %d-byte %s", got, len(raw), header)
	}
}

// TestCheckHeaders_PartHeaders: the bounds hold for every part's header
// at any depth, found by the boundaries as go-message finds them; a
// boundary-like line that is not a delimiter, and a body of many lines,
// are no header.
func TestCheckHeaders_PartHeaders(t *testing.T) {
	bomb := strings.Repeat("A:b\r\n", MaxHeaderFields+1)
	body := strings.Repeat("QUJD\r\n", 5000) // base64 lines: no blank line, yet a body
	mixed := func(part string) string {
		return "Content-Type: multipart/mixed;\r\n boundary=\"O\"\r\n\r\npreamble\r\n--O\r\nContent-Type: text/plain\r\n\r\nhi\r\n" +
			"--O \r\n" + part + "--O--\r\n" + bomb
	}
	nested := func(part string) string {
		return mixed("Content-Type: multipart/alternative; boundary=I\r\n\r\n--I\r\n" + part + "--I--\r\n")
	}
	for _, c := range []struct {
		name, raw string
		refused   bool
	}{
		{"a part's header bomb", mixed(bomb + "\r\nx\r\n"), true},
		{"a nested part's header bomb", nested(bomb + "\r\nx\r\n"), true},
		{"a part ending in its header", mixed(bomb), true},
		{"a long body", nested("Content-Type: application/pdf\r\n\r\n" + body), false},
		{"a long body after a header-only part", mixed("A: b\r\n--O\r\n\r\n" + body), false},
		{"a delimiter-like line in a body", mixed("\r\n--Ox\r\n" + body), false},
		{"not multipart", "Content-Type: text/plain; boundary=O\r\n\r\n--O\r\n" + bomb, false},
		{"the epilogue is no part", mixed("\r\nx\r\n"), false},
	} {
		err := CheckHeaders([]byte(c.raw))
		if c.refused != errors.Is(err, ErrHeaderTooLarge) || !c.refused && err != nil {
			t.Errorf("%s: %v, want refused %v", c.name, err, c.refused)
		}
	}
}

// TestParse_RefusesAPartHeaderBomb: the same bomb as a part's header is
// refused as cheaply.
func TestParse_RefusesAPartHeaderBomb(t *testing.T) {
	raw := []byte("Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\n" + strings.Repeat("A:b\r\n", 2<<20) + "\r\nbody\r\n--B--\r\n")
	parseRefusesCheaply(t, raw, "a part's header bomb", "part header")
}

// FuzzHeaderSize: whatever the input, HeaderSize stays within raw and the
// bounds, and the header it measures is the header net/mail reads from
// the whole message (so raw[:n] can stand in for raw).
func FuzzHeaderSize(f *testing.F) {
	for _, s := range []string{
		"From: a@b.test\r\nSubject: x\r\n\r\nbody",
		"From: a@b.test\nSubject: folded\n\tline\n\nbody\n",
		"A:b\r\nA:b\r\nA:b\r\n",
		" leading space\r\n\r\n",
		"no colon\r\n\r\nbody",
		"\r\n\r\n",
		"A: b\r\r\n\r\n",
		"A: b\r\n\r\r\nC: d\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte("Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nA: b\r\n\r\nx\r\n--B--\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: multipart/mixed; boundary=C\n\n--C\nA:b\n--C--\n--B--"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if err := CheckHeaders(raw); err != nil && !errors.Is(err, ErrHeaderTooLarge) {
			t.Fatalf("CheckHeaders: %v, want only ErrHeaderTooLarge", err)
		}
		n, err := HeaderSize(raw)
		if err != nil {
			if !errors.Is(err, ErrHeaderTooLarge) {
				t.Fatalf("error %v, want only ErrHeaderTooLarge", err)
			}
			return
		}
		if n < 0 || n > len(raw) || n > MaxHeaderBytes+2 {
			t.Fatalf("size %d of %d bytes", n, len(raw))
		}
		whole, werr := mail.ReadMessage(bytes.NewReader(raw))
		part, perr := mail.ReadMessage(bytes.NewReader(raw[:n]))
		if werr != nil || perr != nil {
			return // not a header net/mail reads: nothing to compare
		}
		if len(part.Header) > MaxHeaderFields {
			t.Fatalf("%d fields within the bound", len(part.Header))
		}
		if !reflect.DeepEqual(whole.Header, part.Header) {
			t.Fatalf("header of raw[:%d] %v, of raw %v", n, part.Header, whole.Header)
		}
	})
}
