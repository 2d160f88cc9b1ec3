package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// ErrNotJSON means the body is not a single valid JSON value (no fingerprint exists).
//
// Beyond plain syntax errors this covers everything RFC 8785 (and the
// I-JSON profile it builds on) refuses, and two limits of our own: see
// Fingerprint.
var ErrNotJSON = errors.New("request body is not valid JSON")

// MaxJSONDepth is the deepest nesting of arrays and objects Fingerprint
// accepts; a bare scalar has depth 0 and [] or {} depth 1.
//
// No send request comes close to it. The limit exists so that a body of a
// few kilobytes of '[' cannot make canonicalisation recurse thousands of
// frames deep: the jcs library stops only at 10000 levels.
const MaxJSONDepth = 64

// Fingerprint returns the lowercase hex SHA-256 of the RFC 8785 canonical form of body.
//
// Bodies that differ only in member order, insignificant white space,
// string escaping ("\u00e9" and "é") or number spelling (1, 1.0 and 1e0)
// get the same fingerprint; bodies whose JSON values differ get different
// ones. Every error wraps ErrNotJSON. Besides malformed JSON that means:
//
//   - an empty or white-space-only body;
//   - bytes that are not UTF-8, or a \u escape that leaves a lone surrogate;
//   - anything but white space after the value ({"a":1} x, {}{});
//   - an object with the same member name twice, after unescaping;
//   - nesting deeper than MaxJSONDepth;
//   - a number whose value is not exactly the one its canonical form
//     writes. RFC 8785 reads numbers as IEEE 754 doubles, so on its own it
//     would give 9007199254740993 and 9007199254740992, or 1e-400 and 0, the
//     same fingerprint, and a request reusing a key with a different body
//     would then be mistaken for a retry of the first. Numbers as written
//     by ordinary JSON encoders (shortest round-trip form), and any number
//     of up to 15 significant digits within double range, pass.
//
// The caller should bound the body size; the work here is linear in it.
func Fingerprint(body []byte) (string, error) {
	if len(body) >= largeBody {
		if err := precheckJSON(body); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNotJSON, err)
		}
		return fingerprintLarge(body) // the same hash, without copying the long strings
	}
	canonical, err := canonicalJSON(body)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON returns the RFC 8785 form of body, or an error wrapping
// ErrNotJSON. It is Fingerprint without the hash, kept separate so tests
// can check that canonicalisation is idempotent.
func canonicalJSON(body []byte) ([]byte, error) {
	if err := precheckJSON(body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	// jcs does the real parsing: it enforces the JSON grammar, rejects
	// duplicate member names (compared after unescaping), lone surrogates,
	// invalid UTF-8 inside strings, out-of-range numbers and trailing data.
	canonical, err := jcs.Transform(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	return canonical, nil
}

// precheckJSON enforces, in one linear pass and without recursion, the
// rules jcs.Transform does not: the nesting limit, the exact-number rule
// and a clear error for an empty body. It does not validate the grammar;
// jcs does that afterwards.
//
// The scan only has to be right for input that is valid JSON, since
// anything else is rejected by one of the two checks anyway. On valid JSON,
// strings are the only place a '[', '{' or digit can appear without being
// structure or a number, and strings are delimited exactly as tracked here
// (a backslash always escapes the one byte after it; the hex digits of
// \uXXXX contain no quote or backslash). So jcs never sees deeper nesting
// or a number this pass did not check. On invalid input jcs stops at the
// first byte where its reading and ours could differ, before recursing
// into anything past it.
func precheckJSON(body []byte) error {
	if !utf8.Valid(body) {
		// jcs rejects invalid UTF-8 too, but only inside strings and by
		// accident of its ASCII-only scanner elsewhere; checking the whole
		// body up front does not depend on either.
		return errors.New("invalid UTF-8")
	}
	depth := 0
	sawValue := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '"':
			sawValue = true
			i = skipJSONString(body, i+1)
		case c == '[' || c == '{':
			sawValue = true
			depth++
			if depth > MaxJSONDepth {
				return fmt.Errorf("nested deeper than %d levels", MaxJSONDepth)
			}
		case c == ']' || c == '}':
			depth--
			if depth < 0 {
				return fmt.Errorf("unbalanced %q at byte %d", c, i)
			}
		case c == '-' || ('0' <= c && c <= '9'):
			sawValue = true
			end := i + 1
			for end < len(body) && isJSONNumberByte(body[end]) {
				end++
			}
			if err := checkExactNumber(body[i:end]); err != nil {
				return fmt.Errorf("at byte %d: %w", i, err)
			}
			i = end - 1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			sawValue = true
		}
	}
	if !sawValue {
		return errors.New("empty body")
	}
	return nil
}

// skipJSONString returns the index of the quote that closes the string
// whose content starts at i, or len(body)-1 if the string never closes (the
// grammar check in jcs reports that).
func skipJSONString(body []byte, i int) int {
	for ; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(body) - 1
}

// isJSONNumberByte reports whether c can continue a number token. It is
// wider than the grammar on purpose: the whole run is then checked against
// the grammar, so "1-2" is an error here rather than two tokens.
func isJSONNumberByte(c byte) bool {
	return ('0' <= c && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// checkExactNumber returns an error unless tok is a JSON number whose
// value equals the value of the text RFC 8785 will write for it.
//
// RFC 8785 writes the shortest decimal that reads back as the same double,
// so one double has exactly one canonical text. Requiring the input to have
// that text's value makes the map from accepted number values to canonical
// texts one-to-one, which is what lets equal fingerprints mean equal
// bodies. Comparing values rather than texts keeps 1.0, 1e0 and 10e-1 all
// acceptable spellings of 1.
func checkExactNumber(tok []byte) error {
	if !isJSONNumber(tok) {
		return errors.New("malformed number")
	}
	s := string(tok)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Only overflow gets here: the grammar is already checked.
		return errors.New("number out of the IEEE 754 double range")
	}
	canonical, err := jcs.NumberToJSON(f)
	if err != nil {
		return fmt.Errorf("number has no canonical form: %w", err)
	}
	if jsonDecimalOf(s) != jsonDecimalOf(canonical) {
		const shown = 32
		if len(s) > shown {
			s = s[:shown] + "..."
		}
		return fmt.Errorf("number %s is not exactly representable; the nearest IEEE 754 double is %s", s, canonical)
	}
	return nil
}

// isJSONNumber reports whether tok matches the RFC 8259 number grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func isJSONNumber(tok []byte) bool {
	i := 0
	if i < len(tok) && tok[i] == '-' {
		i++
	}
	switch {
	case i < len(tok) && tok[i] == '0':
		i++
	case i < len(tok) && '1' <= tok[i] && tok[i] <= '9':
		i = skipJSONDigits(tok, i)
	default:
		return false
	}
	if i < len(tok) && tok[i] == '.' {
		j := skipJSONDigits(tok, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		j := skipJSONDigits(tok, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(tok)
}

func skipJSONDigits(tok []byte, i int) int {
	for i < len(tok) && '0' <= tok[i] && tok[i] <= '9' {
		i++
	}
	return i
}

// jsonDecimal is a number's value as ±0.digits × 10^exp, with digits free of
// leading and trailing zeros; zero (of either sign) is the zero value.
// Two decimals are equal exactly when the numbers they came from are.
type jsonDecimal struct {
	neg    bool
	digits string
	exp    int64
}

// jsonDecimalOf returns the value of s, which must match the JSON number
// grammar (canonical RFC 8785 numbers do).
func jsonDecimalOf(s string) jsonDecimal {
	var d jsonDecimal
	if s[0] == '-' {
		d.neg = true
		s = s[1:]
	}
	mantissa, exponent := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			mantissa, exponent = s[:i], s[i+1:]
			break
		}
	}
	intPart, fracPart := mantissa, ""
	for i := 0; i < len(mantissa); i++ {
		if mantissa[i] == '.' {
			intPart, fracPart = mantissa[:i], mantissa[i+1:]
			break
		}
	}
	digits := intPart + fracPart
	point := int64(len(intPart))
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	digits = digits[lead:]
	point -= int64(lead)
	trail := len(digits)
	for trail > 0 && digits[trail-1] == '0' {
		trail--
	}
	digits = digits[:trail]
	if digits == "" {
		return jsonDecimal{}
	}
	d.digits = digits
	d.exp = point + parseSaturatingExponent(exponent)
	return d
}

// parseSaturatingExponent parses an optionally signed run of digits,
// clamping its magnitude: an exponent too large to matter must not
// overflow into a small one and make two different numbers compare equal.
// The clamp is far beyond any double's exponent and any body's length, so
// a clamped exponent never equals a canonical number's.
func parseSaturatingExponent(s string) int64 {
	const limit = 1 << 50
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var e int64
	for i := 0; i < len(s); i++ {
		e = e*10 + int64(s[i]-'0')
		if e > limit {
			e = limit
			break
		}
	}
	if neg {
		return -e
	}
	return e
}
