package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func mustFingerprint(t testing.TB, body string) string {
	t.Helper()
	fp, err := Fingerprint([]byte(body))
	if err != nil {
		t.Fatalf("Fingerprint(%q): %v", body, err)
	}
	return fp
}

func TestFingerprintKnownVector(t *testing.T) {
	body := `{"b":2,"a":[1,"x",true,null]}`
	// Canonical form written out by hand, and its digest from sha256sum.
	const canonical = `{"a":[1,"x",true,null],"b":2}`
	const want = "8f4413535092e3f577cc50b384ef3b7aac5397427878c8e3b17bbe9b7500be08"
	sum := sha256.Sum256([]byte(canonical))
	if hex.EncodeToString(sum[:]) != want {
		t.Fatalf("test vector is inconsistent")
	}
	if got := mustFingerprint(t, body); got != want {
		t.Errorf("Fingerprint(%s) = %s; want %s", body, got, want)
	}
	if got := mustFingerprint(t, canonical); got != want {
		t.Errorf("Fingerprint(%s) = %s; want %s", canonical, got, want)
	}
}

// The example of RFC 8785 section 3.2.2, with one change: the RFC writes
// 333333333.33333329, which is not the value of the double it stands for,
// and Fingerprint refuses such numbers (see TestFingerprintInexactNumbers).
func TestFingerprintRFC8785Example(t *testing.T) {
	const input = `{
  "numbers": [333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	const canonical = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := canonicalJSON([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != canonical {
		t.Errorf("canonical form\n got %s\nwant %s", got, canonical)
	}
	sum := sha256.Sum256([]byte(canonical))
	if fp := mustFingerprint(t, input); fp != hex.EncodeToString(sum[:]) {
		t.Errorf("Fingerprint = %s; want %x", fp, sum)
	}

	original := strings.Replace(input, "333333333.3333333,", "333333333.33333329,", 1)
	if _, err := Fingerprint([]byte(original)); !errors.Is(err, ErrNotJSON) {
		t.Errorf("Fingerprint of the RFC's own inexact number: %v; want ErrNotJSON", err)
	}
}

func TestFingerprintFormat(t *testing.T) {
	fp := mustFingerprint(t, `{}`)
	if len(fp) != 64 || strings.ToLower(fp) != fp {
		t.Fatalf("Fingerprint = %q; want 64 lowercase hex digits", fp)
	}
	if _, err := hex.DecodeString(fp); err != nil {
		t.Fatalf("Fingerprint = %q: %v", fp, err)
	}
}

func TestFingerprintSame(t *testing.T) {
	groups := [][]string{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, " { \"b\" : 2 ,\n\t\"a\":1 }\r\n", "\n{\"a\":1,\"b\":2}"},
		{`{"x":{"b":[1,{"d":1,"c":2}],"a":null}}`, `{"x":{"a":null,"b":[1,{"c":2,"d":1}]}}`},
		{`1`, `1.0`, `1e0`, `1E0`, `1e+0`, `10e-1`, `0.1e1`, `1.000`, ` 1 `},
		{`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`},
		{`0`, `-0`, `0.0`, `-0.0e5`, `0e-999999999999999999999`},
		{`1e21`, `1000000000000000000000`, `1E+21`},
		{`0.000001`, `1e-6`},
		{`1e-7`, `0.0000001`},
		{`9007199254740992`, `9.007199254740992e15`},
		{`"\u00e9"`, `"é"`, `"\u00E9"`},
		{`"\ud83d\ude00"`, `"😀"`},
		{`"a/b"`, `"a\/b"`},
		{`"A"`, `"\u0041"`},
		{`"\n"`, `"\u000a"`, `"\u000A"`},
		{`{"é":1}`, `{"\u00e9":1}`},
		{`[]`, `[ ]`, "[\n]"},
		{`"<&>"`, `"\u003c\u0026\u003e"`},
	}
	for _, group := range groups {
		want := mustFingerprint(t, group[0])
		for _, body := range group[1:] {
			if got := mustFingerprint(t, body); got != want {
				t.Errorf("Fingerprint(%s) = %s, differs from Fingerprint(%s) = %s", body, got, group[0], want)
			}
		}
	}
}

func TestFingerprintDifferent(t *testing.T) {
	bodies := []string{
		`{"a":1}`, `{"a":2}`, `{"a":"1"}`, `{"a":1.5}`, `{"a":-1}`, `{"A":1}`,
		`{"a":true}`, `{"a":"true"}`, `{"a":null}`, `{"a":"null"}`, `{}`, `{"a":{}}`, `{"a":[]}`,
		`[1,2]`, `[2,1]`, `[[1,2]]`, `[1,[2]]`, `1`, `"1"`, `[1]`, `null`, `""`, `" "`,
		`"é"`, `"e\u0301"`, // composed and decomposed forms are different strings
		`9007199254740992`, `9007199254740994`, `0.1`, `0.30000000000000004`, `0.3`,
		`{"to":["a@example.com"],"subject":"hi"}`, `{"to":["b@example.com"],"subject":"hi"}`,
		`{"a":{"b":1}}`, `{"a":{"b":1},"c":1}`, `{"a.b":1}`,
	}
	seen := map[string]string{}
	for _, body := range bodies {
		fp := mustFingerprint(t, body)
		if other, ok := seen[fp]; ok {
			t.Errorf("Fingerprint(%s) == Fingerprint(%s)", body, other)
		}
		seen[fp] = body
	}
}

func TestFingerprintNotJSON(t *testing.T) {
	tests := []struct{ name, body string }{
		{"nil", ""},
		{"space", " "},
		{"white space", " \t\r\n "},
		{"invalid UTF-8 alone", "\xff"},
		{"invalid UTF-8 in string", "\"\xff\""},
		{"truncated UTF-8 in key", "{\"\xc3\":1}"},
		{"UTF-8 surrogate encoding", "\"\xed\xa0\x80\""},
		{"overlong UTF-8", "\"\xc0\xaf\""},
		{"byte order mark", "\ufeff{}"},
		{"trailing garbage", `{"a":1} x`},
		{"two objects", `{}{}`},
		{"two arrays", `[1] [2]`},
		{"two numbers", `1 2`},
		{"trailing comma in array", `[1,]`},
		{"trailing comma in object", `{"a":1,}`},
		{"leading comma", `[,1]`},
		{"unterminated object", `{"a":1`},
		{"unterminated array", `[1`},
		{"unterminated string", `"abc`},
		{"unbalanced close", `]`},
		{"mismatched close", `[1}`},
		{"single quotes", `{'a':1}`},
		{"bare word", `abc`},
		{"truncated literal", `tru`},
		{"capital literal", `True`},
		{"NaN", `NaN`},
		{"Infinity", `Infinity`},
		{"minus Infinity", `-Infinity`},
		{"leading zero", `01`},
		{"leading plus", `+1`},
		{"bare minus", `-`},
		{"trailing dot", `1.`},
		{"leading dot", `.5`},
		{"empty exponent", `1e`},
		{"signed empty exponent", `1e+`},
		{"hex", `0x10`},
		{"underscore", `1_000`},
		{"number with inner space", `[1 2]`},
		{"control character in string", "\"a\tb\""},
		{"newline in string", "\"a\nb\""},
		{"bad escape", `"\x"`},
		{"short unicode escape", `"\u12"`},
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"\udc00"`},
		{"high surrogate then letter", `"\ud800a"`},
		{"high surrogate then non-low", `"\ud800\u0041"`},
		{"duplicate key", `{"a":1,"a":1}`},
		{"duplicate key differing values", `{"a":1,"a":2}`},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`},
		{"duplicate key nested", `{"x":[{"b":1,"c":2,"b":3}]}`},
		{"duplicate empty key", `{"":1,"":2}`},
		{"missing colon", `{"a" 1}`},
		{"non-string key", `{1:1}`},
		{"comment", `{"a":1 /* c */}`},
		{"nesting 65 arrays", strings.Repeat("[", 65) + strings.Repeat("]", 65)},
		{"nesting 65 objects", strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65)},
		{"nesting 65 mixed", strings.Repeat(`[{"a":`, 33) + "1" + strings.Repeat("}]", 33)},
		{"unclosed deep nesting", strings.Repeat("[", 1<<20)},
		{"closed deep nesting", strings.Repeat("[", 20000) + strings.Repeat("]", 20000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp, err := Fingerprint([]byte(tt.body))
			if !errors.Is(err, ErrNotJSON) {
				t.Fatalf("Fingerprint(%.40q) = %q, %v; want ErrNotJSON", tt.body, fp, err)
			}
			if fp != "" {
				t.Errorf("Fingerprint returned %q along with an error", fp)
			}
		})
	}
	if _, err := Fingerprint(nil); !errors.Is(err, ErrNotJSON) {
		t.Errorf("Fingerprint(nil) = %v; want ErrNotJSON", err)
	}
}

func TestFingerprintDepthLimit(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat(`[{"k":`, depth/2) + strings.Repeat("[", depth%2) + "0" +
			strings.Repeat("]", depth%2) + strings.Repeat("}]", depth/2)
	}
	for depth := 0; depth <= MaxJSONDepth; depth++ {
		if _, err := Fingerprint([]byte(nested(depth))); err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
	}
	if _, err := Fingerprint([]byte(nested(MaxJSONDepth + 1))); !errors.Is(err, ErrNotJSON) {
		t.Fatalf("depth %d: %v; want ErrNotJSON", MaxJSONDepth+1, err)
	}
	// Brackets inside strings are not nesting.
	deepString := `{"s":"` + strings.Repeat("[{", 1000) + `\"` + `"}`
	if _, err := Fingerprint([]byte(deepString)); err != nil {
		t.Fatalf("brackets inside a string: %v", err)
	}
	if got, want := jsonDepth(t, []byte(nested(MaxJSONDepth))), MaxJSONDepth; got != want {
		t.Fatalf("test helper nested(%d) has depth %d", want, got)
	}
}

// Numbers that RFC 8785 would silently round to a different value are
// refused, since two different bodies would otherwise share a fingerprint.
func TestFingerprintInexactNumbers(t *testing.T) {
	for _, body := range []string{
		`9007199254740993`,                // 2^53 + 1 reads as 2^53
		`[9007199254740993]`,              // also inside structure
		`{"id":12345678901234567890}`,     // a uint64 id
		`1152921504606846976`,             // 2^60 exactly, but written 1152921504606847000
		`1e-400`,                          // underflows to 0
		`-1e-400`,                         // underflows to -0
		`1e400`,                           // overflows
		`-1e400`,                          // overflows
		`1e99999999999999999999999999999`, // overflows
		`0.30000000000000001`,             // reads as 0.3
		`0.1000000000000000055511151231257827`,
		`1.00000000000000000000000001`,
		`4.9406564584124654e-324`, // smallest subnormal, written 5e-324
		`2e-324`,
		`1` + strings.Repeat("0", 400),
	} {
		if fp, err := Fingerprint([]byte(body)); !errors.Is(err, ErrNotJSON) {
			t.Errorf("Fingerprint(%.50s) = %q, %v; want ErrNotJSON", body, fp, err)
		}
	}
	for _, body := range []string{
		`9007199254740992`, `-9007199254740992`, `9007199254740991`, `1152921504606847000`,
		`123456789012345`, `0.123456789012345`, `1.23456789012345e-300`,
		`0.1`, `0.2`, `0.30000000000000004`, `5e-324`, `1.7976931348623157e308`, `-1.7976931348623157e+308`,
		`2.2250738585072014e-308`, `1e21`, `1e-7`, `123.456`, `100`, `1e2`, `0.5e-6`,
		`1` + strings.Repeat("0", 300), `0.` + strings.Repeat("0", 300) + `1`,
	} {
		if _, err := Fingerprint([]byte(body)); err != nil {
			t.Errorf("Fingerprint(%.50s): %v", body, err)
		}
	}
}

func TestFingerprintErrorIsBounded(t *testing.T) {
	body := `{"a":"` + strings.Repeat("x", 1<<16) + `","a":1}`
	_, err := Fingerprint([]byte(body))
	if !errors.Is(err, ErrNotJSON) {
		t.Fatalf("Fingerprint: %v; want ErrNotJSON", err)
	}
	if len(err.Error()) > 200 {
		t.Errorf("error is %d bytes long; want the body kept out of it", len(err.Error()))
	}
	_, err = Fingerprint([]byte(`1` + strings.Repeat("1", 1<<16) + `.5`))
	if !errors.Is(err, ErrNotJSON) {
		t.Fatalf("Fingerprint: %v; want ErrNotJSON", err)
	}
	if len(err.Error()) > 200 {
		t.Errorf("error is %d bytes long; want the body kept out of it", len(err.Error()))
	}
}

func TestCanonicalJSONIsIdempotent(t *testing.T) {
	body := []byte(`{"z":[1.50,2e3,"\u00e9\n"],"a":{"y":null,"x":-0}}`)
	once, err := canonicalJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := canonicalJSON(once)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(once, twice) {
		t.Fatalf("canonical form is not stable:\n%s\n%s", once, twice)
	}
	if want := "{\"a\":{\"x\":0,\"y\":null},\"z\":[1.5,2000,\"é\\n\"]}"; string(once) != want {
		t.Fatalf("canonicalJSON = %s; want %s", once, want)
	}
}

// jsonDepth measures nesting with encoding/json, independently of the
// scanner in fingerprint.go. The body must be valid JSON.
func jsonDepth(t testing.TB, body []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatalf("jsonDepth(%.40q): %v", body, err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// oracleVerdict decides, with encoding/json and math/big rather than the
// code under test, whether body meets every rule Fingerprint enforces
// except the two it cannot see through encoding/json (lone surrogate
// escapes, which encoding/json turns into U+FFFD, and trailing data after
// the value, covered by json.Valid). decided is false when the oracle
// would be too slow to be sure (numbers with very long exponents).
func oracleVerdict(body []byte) (ok, decided bool) {
	if !json.Valid(body) || !utf8.Valid(body) {
		return false, true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object  bool
		wantKey bool
		keys    map[string]bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return true, true
		}
		if err != nil {
			return false, true
		}
		if d, isDelim := tok.(json.Delim); isDelim && (d == ']' || d == '}') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			key := tok.(string)
			if stack[n-1].keys[key] {
				return false, true // duplicate member name
			}
			stack[n-1].keys[key] = true
			stack[n-1].wantKey = false
			continue
		}
		switch v := tok.(type) {
		case json.Delim:
			stack = append(stack, frame{object: v == '{', wantKey: v == '{', keys: map[string]bool{}})
			if len(stack) > MaxJSONDepth {
				return false, true
			}
			continue
		case json.Number:
			s := string(v)
			if i := strings.IndexAny(s, "eE"); i >= 0 && len(strings.TrimLeft(s[i+1:], "+-")) > 4 {
				return false, false
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return false, true
			}
			exact, _ := new(big.Rat).SetString(s)
			nearest, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'e', -1, 64))
			if exact.Cmp(nearest) != 0 {
				return false, true
			}
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
}

func TestOracleAgrees(t *testing.T) {
	for _, body := range []string{`{"a":[1,{"b":2}],"c":3}`, `[{"a":1},{"a":1}]`, `0.1`, `{"a":{"a":{}}}`} {
		if ok, decided := oracleVerdict([]byte(body)); !ok || !decided {
			t.Errorf("oracle rejects %s", body)
		}
	}
	for _, body := range []string{`{"a":[1,{"b":2}],"a":3}`, `{"a":{"b":1,"b":2}}`, `9007199254740993`, `1e-400`} {
		if ok, decided := oracleVerdict([]byte(body)); ok || !decided {
			t.Errorf("oracle accepts %s", body)
		}
	}
}

func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `null`, `true`, `0`, `-0`, `1.0`, `1e0`, `"é"`, `"\u00e9"`,
		`{"b":2,"a":[1,"x",true,null]}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":1} x`, `{}{}`,
		`9007199254740993`, `1e-400`, `1e400`, `0.30000000000000004`, `"\ud83d\ude00"`, `"\ud800"`,
		"\"\xff\"", `[1,]`, `01`, `{"s":"[[[[\"]]"}`, strings.Repeat("[", 65) + strings.Repeat("]", 65),
		fingerprintBenchBody,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fp, err := Fingerprint(body)
		ok, decided := oracleVerdict(body)
		if err != nil {
			if !errors.Is(err, ErrNotJSON) {
				t.Fatalf("error %v does not wrap ErrNotJSON", err)
			}
			if fp != "" {
				t.Fatalf("returned %q along with an error", fp)
			}
			// If the oracle finds nothing wrong, the failure must be one
			// of the two things it cannot see.
			if ok && decided && !bytes.Contains(body, []byte(`\u`)) {
				t.Fatalf("Fingerprint(%q) = %v, but the oracle accepts it", body, err)
			}
			return
		}

		if !json.Valid(body) {
			t.Fatalf("Fingerprint(%q) succeeded on invalid JSON", body)
		}
		if decided && !ok {
			t.Fatalf("Fingerprint(%q) succeeded, but the oracle rejects it", body)
		}
		if len(fp) != 64 {
			t.Fatalf("Fingerprint = %q: want 64 hex digits", fp)
		}
		for i := 0; i < len(fp); i++ {
			if c := fp[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("Fingerprint = %q: want lowercase hex", fp)
			}
		}
		if again, err := Fingerprint(body); err != nil || again != fp {
			t.Fatalf("Fingerprint is unstable: %q then %q, %v", fp, again, err)
		}

		canonical, err := canonicalJSON(body)
		if err != nil {
			t.Fatalf("canonicalJSON failed where Fingerprint succeeded: %v", err)
		}
		if sum := sha256.Sum256(canonical); hex.EncodeToString(sum[:]) != fp {
			t.Fatalf("Fingerprint is not the SHA-256 of the canonical form %q", canonical)
		}
		if fp2, err := Fingerprint(canonical); err != nil || fp2 != fp {
			t.Fatalf("Fingerprint(canonical %q) = %q, %v; want %q", canonical, fp2, err, fp)
		}

		// Decoding and re-encoding with encoding/json changes spelling
		// only (escapes, number forms, member order), never the value.
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("encoding/json cannot decode %q: %v", body, err)
		}
		remarshalled, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encoding/json cannot re-encode %q: %v", body, err)
		}
		if fp3, err := Fingerprint(remarshalled); err != nil || fp3 != fp {
			t.Fatalf("Fingerprint(re-marshalled %q) = %q, %v; want %q", remarshalled, fp3, err, fp)
		}
	})
}

// fingerprintBenchBody is a realistic send request of about 1 KiB.
const fingerprintBenchBody = `{
  "from": "Acme Billing <billing@acme.example>",
  "to": ["jane.doe@example.com", "John Smith <john.smith@example.org>"],
  "cc": ["accounts@example.com"],
  "reply_to": "support@acme.example",
  "subject": "Your invoice INV-2024-000123 is ready",
  "html": "<!doctype html><html><body style=\"font-family:Arial,sans-serif;color:#222\"><h1>Invoice INV-2024-000123</h1><p>Hi Jane,</p><p>Your invoice for <strong>March 2024</strong> is ready. The total due is <strong>&euro;1,249.00</strong>, payable by 15 April 2024.</p><table><tr><td>Pro plan</td><td>&euro;999.00</td></tr><tr><td>Extra seats (5)</td><td>&euro;250.00</td></tr></table><p><a href=\"https://acme.example/invoices/INV-2024-000123?utm_source=email&amp;utm_medium=invoice\">View invoice</a></p><p>Thanks,<br>The Acme team</p></body></html>",
  "text": "Hi Jane, your invoice INV-2024-000123 for March 2024 is ready. Total due: EUR 1,249.00 by 15 April 2024. https://acme.example/invoices/INV-2024-000123",
  "tags": [{"name": "category", "value": "invoice"}, {"name": "tenant", "value": "acme"}, {"name": "month", "value": "2024-03"}],
  "headers": {"X-Entity-Ref-ID": "inv-000123"},
  "scheduled_at": null,
  "track_opens": true,
  "amount_cents": 124900
}`

func BenchmarkFingerprint(b *testing.B) {
	body := []byte(fingerprintBenchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint(body); err != nil {
			b.Fatal(err)
		}
	}
}
