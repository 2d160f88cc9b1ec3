package idempotency

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	max255 := strings.Repeat("k", 255)
	max256 := strings.Repeat("k", 256)
	allVisible := func() string {
		var b strings.Builder
		for c := byte(0x21); c <= 0x7E; c++ {
			b.WriteByte(c)
		}
		return b.String()
	}()

	tests := []struct {
		name   string
		raw    string
		maxLen int
		want   string // key wanted; "" means ErrKeyInvalid wanted
	}{
		{"one char", "a", MaxKeyLen, "a"},
		{"uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", MaxKeyLen, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"every visible byte", allVisible, MaxKeyLen, allVisible},
		{"sf-string every visible byte", sfQuote(allVisible), MaxKeyLen, allVisible},
		{"255 chars", max255, MaxKeyLen, max255},
		{"256 chars over native limit", max256, MaxKeyLen, ""},
		{"256 chars at compat limit", max256, 256, max256},
		{"257 chars over compat limit", max256 + "k", 256, ""},
		{"empty", "", MaxKeyLen, ""},
		{"maxLen zero", "a", 0, ""},
		{"maxLen negative", "a", -1, ""},
		{"space inside", "ab c", MaxKeyLen, ""},
		{"leading space", " abc", MaxKeyLen, ""},
		{"trailing space", "abc ", MaxKeyLen, ""},
		{"only space", " ", MaxKeyLen, ""},
		{"tab", "ab\tc", MaxKeyLen, ""},
		{"non-ASCII", "caf\u00e9", MaxKeyLen, ""},
		{"CR", "abc\r", MaxKeyLen, ""},
		{"LF", "abc\n", MaxKeyLen, ""},
		{"CRLF header injection", "abc\r\nX-Evil: 1", MaxKeyLen, ""},
		{"NUL", "ab\x00c", MaxKeyLen, ""},
		{"DEL", "ab\x7fc", MaxKeyLen, ""},
		{"invalid UTF-8", "ab\xffc", MaxKeyLen, ""},

		// A '"' that is not the first byte is an ordinary character.
		{"raw quote inside", `ab"c`, MaxKeyLen, `ab"c`},
		{"raw quote at end", `abc"`, MaxKeyLen, `abc"`},
		{"raw backslash", `a\b`, MaxKeyLen, `a\b`},
		{"raw quoted-looking inside", `a"b"`, MaxKeyLen, `a"b"`},

		// A leading '"' makes it an RFC 8941 sf-string.
		{"sf-string", `"abc"`, MaxKeyLen, "abc"},
		{"sf-string one char", `"a"`, MaxKeyLen, "a"},
		{"sf-string escaped quote", `"a\"b"`, MaxKeyLen, `a"b`},
		{"sf-string escaped backslash", `"a\\b"`, MaxKeyLen, `a\b`},
		{"sf-string only escapes", `"\"\\"`, MaxKeyLen, `"\`},
		{"sf-string escape at start and end", `"\"abc\""`, MaxKeyLen, `"abc"`},
		{"sf-string 255 content", `"` + max255 + `"`, MaxKeyLen, max255},
		{"sf-string 256 content", `"` + max256 + `"`, MaxKeyLen, ""},
		{"sf-string 256 content compat", `"` + max256 + `"`, 256, max256},
		{"sf-string escapes do not count toward length",
			`"` + strings.Repeat(`\"`, 255) + `"`, MaxKeyLen, strings.Repeat(`"`, 255)},
		{"sf-string unterminated", `"abc`, MaxKeyLen, ""},
		{"sf-string lone quote", `"`, MaxKeyLen, ""},
		{"sf-string bad escape n", `"a\nb"`, MaxKeyLen, ""},
		{"sf-string bad escape u", `"a\u0041"`, MaxKeyLen, ""},
		{"sf-string escape at end", `"abc\`, MaxKeyLen, ""},
		{"sf-string escaped closing quote", `"abc\"`, MaxKeyLen, ""},
		{"sf-string empty", `""`, MaxKeyLen, ""},
		{"sf-string space inside", `"a b"`, MaxKeyLen, ""},
		{"sf-string only space", `" "`, MaxKeyLen, ""},
		{"sf-string tab", "\"a\tb\"", MaxKeyLen, ""},
		{"sf-string DEL", "\"a\x7fb\"", MaxKeyLen, ""},
		{"sf-string non-ASCII", "\"caf\u00e9\"", MaxKeyLen, ""},
		{"sf-string trailing bytes", `"abc"d`, MaxKeyLen, ""},
		{"sf-string quote inside unescaped", `"a"b"`, MaxKeyLen, ""},
		{"sf-string list of two", `"a", "b"`, MaxKeyLen, ""},
		{"sf-string followed by parameter", `"abc";x=1`, MaxKeyLen, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.raw, tt.maxLen)
			if tt.want == "" {
				if !errors.Is(err, ErrKeyInvalid) {
					t.Fatalf("ParseKey(%q, %d) = %q, %v; want ErrKeyInvalid", tt.raw, tt.maxLen, got, err)
				}
				if got != "" {
					t.Errorf("ParseKey(%q, %d) returned key %q along with error", tt.raw, tt.maxLen, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseKey(%q, %d) = %q, %v; want %q", tt.raw, tt.maxLen, got, err, tt.want)
			}
		})
	}
}

// The reason is for logs, which must not receive the attacker's bytes.
func TestParseKeyErrorDoesNotEchoKey(t *testing.T) {
	for _, raw := range []string{"secret\r\nX-Injected: 1", `"secret value"`, "secret\x00"} {
		_, err := ParseKey(raw, MaxKeyLen)
		if err == nil {
			t.Fatalf("ParseKey(%q) succeeded", raw)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q echoes the key", err)
		}
	}
}

// sfQuote spells key as an RFC 8941 sf-string.
func sfQuote(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

func TestParseKeyQuotedAndRawAgree(t *testing.T) {
	for _, key := range []string{"a", "abc", `ab"c`, `a\b`, `abc"`, strings.Repeat("z", MaxKeyLen)} {
		got, err := ParseKey(sfQuote(key), MaxKeyLen)
		if err != nil || got != key {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", sfQuote(key), got, err, key)
		}
		got, err = ParseKey(key, MaxKeyLen)
		if err != nil || got != key {
			t.Errorf("ParseKey(%q) = %q, %v; want it unchanged", key, got, err)
		}
	}
}

func TestKeyFromHeader(t *testing.T) {
	tests := []struct {
		name        string
		header      http.Header
		wantKey     string
		wantPresent bool
		wantErr     bool
	}{
		{"absent", http.Header{"Content-Type": {"application/json"}}, "", false, false},
		{"nil header", nil, "", false, false},
		{"present once", http.Header{"Idempotency-Key": {"abc"}}, "abc", true, false},
		{"present once as sf-string", http.Header{"Idempotency-Key": {`"abc"`}}, "abc", true, false},
		{"present but empty", http.Header{"Idempotency-Key": {""}}, "", true, true},
		{"present but invalid", http.Header{"Idempotency-Key": {"a b"}}, "", true, true},
		{"present twice", http.Header{"Idempotency-Key": {"abc", "abc"}}, "", true, true},
		{"present twice differing", http.Header{"Idempotency-Key": {"abc", "def"}}, "", true, true},
		{"present twice one empty", http.Header{"Idempotency-Key": {"abc", ""}}, "", true, true},
		{"present twice non-canonical", http.Header{
			"Idempotency-Key": {"abc"},
			"idempotency-key": {"def"},
		}, "", true, true},
		{"present once non-canonical", http.Header{"idempotency-key": {"abc"}}, "abc", true, false},
		{"similar name is not it", http.Header{"Idempotency-Keys": {"abc"}}, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, present, err := KeyFromHeader(tt.header, MaxKeyLen)
			if key != tt.wantKey || present != tt.wantPresent {
				t.Errorf("KeyFromHeader = %q, %v, %v; want %q, %v", key, present, err, tt.wantKey, tt.wantPresent)
			}
			if tt.wantErr != (err != nil) {
				t.Errorf("KeyFromHeader error = %v; want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrKeyInvalid) {
				t.Errorf("KeyFromHeader error %v does not wrap ErrKeyInvalid", err)
			}
		})
	}
}

func TestKeyFromHeaderTwiceSaysSo(t *testing.T) {
	h := http.Header{}
	h.Add("Idempotency-Key", "abc")
	h.Add("Idempotency-Key", "abc")
	_, _, err := KeyFromHeader(h, MaxKeyLen)
	if !errors.Is(err, ErrKeyInvalid) || !strings.Contains(err.Error(), "given more than once") {
		t.Fatalf("KeyFromHeader with two lines: %v; want ErrKeyInvalid, given more than once", err)
	}
}

// The parsed request is what KeyFromHeader really sees: check that two
// header lines on the wire stay two lines through net/http.
func TestKeyFromHeaderWireRequest(t *testing.T) {
	for _, tt := range []struct {
		lines   string
		want    string
		wantErr bool
	}{
		{"Idempotency-Key: abc\r\n", "abc", false},
		{"idempotency-key: \"abc\"\r\n", "abc", false},
		{"Idempotency-Key: abc\r\nIdempotency-Key: abc\r\n", "", true},
		{"Idempotency-Key: abc\r\nIDEMPOTENCY-KEY: def\r\n", "", true},
	} {
		raw := "POST /emails HTTP/1.1\r\nHost: x\r\n" + tt.lines + "\r\n"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatalf("ReadRequest(%q): %v", raw, err)
		}
		key, present, err := KeyFromHeader(req.Header, MaxKeyLen)
		if !present || key != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%q: KeyFromHeader = %q, %v, %v; want %q, error %v", tt.lines, key, present, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	seeds := []string{
		"", "a", "abc", `"abc"`, `"a\"b"`, `"a\\b"`, `"abc`, `"a\nb"`, `""`, `" "`, `"a b"`,
		`ab"c`, `abc"`, `"`, `"\`, `"\"`, "a b", "a\tb", "caf\u00e9", "a\r\nb", "a\x7f",
		strings.Repeat("k", 255), strings.Repeat("k", 256), `"` + strings.Repeat("k", 256) + `"`,
	}
	for _, s := range seeds {
		f.Add(s, uint16(MaxKeyLen))
		f.Add(s, uint16(256))
	}
	f.Add("abc", uint16(0))
	f.Add("abc", uint16(2))
	f.Fuzz(func(t *testing.T, raw string, maxLen16 uint16) {
		maxLen := int(maxLen16)
		key, err := ParseKey(raw, maxLen)
		if err != nil {
			if !errors.Is(err, ErrKeyInvalid) {
				t.Fatalf("ParseKey(%q, %d) error %v does not wrap ErrKeyInvalid", raw, maxLen, err)
			}
			if key != "" {
				t.Fatalf("ParseKey(%q, %d) returned %q with an error", raw, maxLen, key)
			}
		} else {
			if len(key) < 1 || len(key) > maxLen {
				t.Fatalf("ParseKey(%q, %d) = %q: length %d outside 1..%d", raw, maxLen, key, len(key), maxLen)
			}
			for i := 0; i < len(key); i++ {
				if key[i] < 0x21 || key[i] > 0x7E {
					t.Fatalf("ParseKey(%q, %d) = %q: byte 0x%02x is not visible ASCII", raw, maxLen, key, key[i])
				}
			}
		}

		// Independent statement of the contract for raw values.
		visible := raw != ""
		for i := 0; i < len(raw); i++ {
			if raw[i] < 0x21 || raw[i] > 0x7E {
				visible = false
			}
		}
		if visible && raw[0] != '"' && len(raw) <= maxLen && (err != nil || key != raw) {
			t.Fatalf("ParseKey(%q, %d) = %q, %v; want the raw value back", raw, maxLen, key, err)
		}
		if err == nil && raw[0] != '"' && key != raw {
			t.Fatalf("ParseKey(%q, %d) = %q; a raw key must be returned unchanged", raw, maxLen, key)
		}

		// Every key has an sf-string spelling that means the same key, and
		// only valid keys are valid when quoted.
		if err == nil {
			if again, err := ParseKey(sfQuote(key), maxLen); err != nil || again != key {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", sfQuote(key), again, err, key)
			}
		}
		if visible && len(raw) <= maxLen {
			if got, err := ParseKey(sfQuote(raw), maxLen); err != nil || got != raw {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", sfQuote(raw), got, err, raw)
			}
		}
	})
}

// parseKeyBenchInputs are a UUID raw and quoted, and a quoted key with
// both escapes.
var parseKeyBenchInputs = []string{"8e03978e-40d5-43e8-bc93-6894a57f9324", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `"a\"b\\c"`}

// BenchmarkParseKey's yardstick is BenchmarkParseKey_Yardstick on the same
// inputs.
func BenchmarkParseKey(b *testing.B) {
	for _, raw := range parseKeyBenchInputs {
		b.Run(raw, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseKey(raw, MaxKeyLen); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseKey_Yardstick does the least a key's parse must on the
// same inputs: a raw key is scanned once for a byte that is not visible
// ASCII; a quoted one is unquoted with strconv.Unquote, whose escapes
// include sf-string's two. The ratio per input is what ParseKey's own
// rules (lengths, RFC 8941's escapes, its errors) cost beyond that.
func BenchmarkParseKey_Yardstick(b *testing.B) {
	for _, raw := range parseKeyBenchInputs {
		b.Run(raw, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if raw[0] == '"' {
					if _, err := strconv.Unquote(raw); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for i := 0; i < len(raw); i++ {
					if c := raw[i]; c < 0x21 || c > 0x7e {
						b.Fatal("not visible ASCII")
					}
				}
			}
		})
	}
}
