package idempotency

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrKeyInvalid is returned (wrapped, with a reason) for every bad key.
//
// The reasons never quote the key itself: it is attacker controlled and
// error strings end up in logs, so they name only a position and a byte
// value.
var ErrKeyInvalid = errors.New("idempotency key invalid")

// MaxKeyLen is the longest key the native API accepts. The compatibility
// API passes its own, larger limit to ParseKey instead.
const MaxKeyLen = 255

// idempotencyKeyHeader is the request header that carries the key.
const idempotencyKeyHeader = "Idempotency-Key"

// ParseKey validates the raw header value and returns the key it means.
//
// Two spellings are accepted, and they name the same set of keys:
//
//   - A raw value: 1 to maxLen bytes of visible ASCII (0x21-0x7E), taken
//     as is. A '"' anywhere but the first byte is just another visible
//     character, so ab"c and abc" are valid keys.
//   - A structured-field string (RFC 8941 sf-string, as the IETF httpapi
//     Idempotency-Key draft specifies): a value whose first byte is '"'.
//     Its content, after undoing the only two escapes \" and \\, is the
//     key, so "abc" and abc are the same key.
//
// A leading '"' always selects the sf-string reading, even when the value
// does not end with '"': "abc is far more likely a truncated or badly
// generated sf-string than a key that really begins with a quote, and
// guessing wrong in either direction would make two requests the client
// thinks are the same (or different) disagree with us. A key that does
// begin with '"' can still be sent, escaped inside an sf-string.
//
// The sf-string grammar allows a space (0x20), but the decoded content must
// pass the same visible-ASCII, 1..maxLen rule as a raw value. We choose
// this so that the quoted and unquoted forms cover exactly the same keys:
// every key has a raw spelling (unless it begins with '"') and a quoted
// one, and no key exists that only one of the two forms can express.
//
// maxLen bounds the decoded key, not the header value, so a quoted key may
// be up to maxLen bytes plus its quotes and escapes.
func ParseKey(raw string, maxLen int) (string, error) {
	if maxLen < 1 {
		// A caller bug rather than a client one, but failing closed keeps
		// a misconfigured route from accepting every key.
		return "", fmt.Errorf("%w: maximum length %d is below 1", ErrKeyInvalid, maxLen)
	}
	if raw == "" {
		return "", fmt.Errorf("%w: empty", ErrKeyInvalid)
	}
	if raw[0] == '"' {
		return parseKeySFString(raw, maxLen)
	}
	if reason := checkKeyContent(raw, maxLen); reason != "" {
		return "", fmt.Errorf("%w: %s", ErrKeyInvalid, reason)
	}
	return raw, nil
}

// parseKeySFString decodes raw, which begins with '"', as an RFC 8941
// sf-string that must span the whole value, and then applies the same
// content rule as for a raw key.
func parseKeySFString(raw string, maxLen int) (string, error) {
	// Most keys contain no escapes, so the content is usually a substring
	// of raw and the builder is only used once an escape is seen.
	var b strings.Builder
	escaped := false
	start := 1
	for i := 1; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 >= len(raw) {
				return "", fmt.Errorf("%w: sf-string ends inside an escape", ErrKeyInvalid)
			}
			next := raw[i+1]
			if next != '"' && next != '\\' {
				// RFC 8941 has only these two escapes; \n, \u and the
				// rest are not shorthand for anything.
				return "", fmt.Errorf("%w: sf-string has invalid escape of byte 0x%02x at position %d",
					ErrKeyInvalid, next, i+1)
			}
			if !escaped {
				escaped = true
				b.Grow(len(raw))
			}
			b.WriteString(raw[start:i])
			b.WriteByte(next)
			i++
			start = i + 1
		case c == '"':
			if i != len(raw)-1 {
				return "", fmt.Errorf("%w: sf-string is followed by more bytes at position %d",
					ErrKeyInvalid, i+1)
			}
			content := raw[1:i]
			if escaped {
				b.WriteString(raw[start:i])
				content = b.String()
			}
			if content == "" {
				return "", fmt.Errorf("%w: sf-string is empty", ErrKeyInvalid)
			}
			if reason := checkKeyContent(content, maxLen); reason != "" {
				return "", fmt.Errorf("%w: sf-string content: %s", ErrKeyInvalid, reason)
			}
			return content, nil
		case c < 0x20 || c > 0x7E:
			return "", fmt.Errorf("%w: sf-string has byte 0x%02x at position %d outside 0x20-0x7E",
				ErrKeyInvalid, c, i)
		}
	}
	return "", fmt.Errorf("%w: sf-string has no closing quote", ErrKeyInvalid)
}

// checkKeyContent enforces the rule every key must meet whichever way it
// was spelled: 1 to maxLen bytes, each visible ASCII. It returns why key
// breaks the rule, or "" if it does not.
func checkKeyContent(key string, maxLen int) string {
	if key == "" {
		return "empty"
	}
	if len(key) > maxLen {
		return fmt.Sprintf("%d bytes long, more than %d", len(key), maxLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7E {
			return fmt.Sprintf("byte 0x%02x at position %d is not visible ASCII", c, i)
		}
	}
	return ""
}

// KeyFromHeader finds the Idempotency-Key header in h and parses it with
// ParseKey. present is false only when no such header was sent; an empty
// header value is present and invalid.
//
// The header is a single sf-string item, not a list, so more than one
// header line is rejected rather than picking one: a client (or a proxy
// that appended its own) that sends two keys has not told us which
// request this is, and choosing either could send an email twice.
func KeyFromHeader(h http.Header, maxLen int) (key string, present bool, err error) {
	// net/http canonicalises the names it parses, but an http.Header built
	// by hand (tests, middleware) may not be, and a non-canonical second
	// line must still count as a second line.
	var values []string
	for name, vs := range h {
		if strings.EqualFold(name, idempotencyKeyHeader) {
			values = append(values, vs...)
		}
	}
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
		key, err := ParseKey(values[0], maxLen)
		if err != nil {
			return "", true, fmt.Errorf("%s header: %w", idempotencyKeyHeader, err)
		}
		return key, true, nil
	default:
		return "", true, fmt.Errorf("%s header: %w: given more than once (%d times)",
			idempotencyKeyHeader, ErrKeyInvalid, len(values))
	}
}
