package idempotency

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/gowebpki/jcs"
)

// Large bodies (a send with a 10 MiB file is 13.4 MiB of JSON) are
// fingerprinted without handing the long strings to jcs, whose parser
// copies a string several times over (about 13 bytes allocated per byte of
// body, and 15 MB/s, measured by BenchmarkFingerprint_10MiBAttachment).
//
// The result is the same hash, byte for byte: RFC 8785 writes a string
// value that has no escape and no control character exactly as it came,
// between quotes. So each such long value is swapped for a short
// placeholder, jcs canonicalises the small rest (sorting members as
// always; placeholders stand only in values, never in member names), and
// the hash is taken over that output with every placeholder replaced by
// its original bytes again, written straight from the body.

const (
	// largeBody is the size from which the long strings are set aside.
	largeBody = 64 << 10
	// longString is the shortest string value that is set aside.
	longString = 1 << 10
)

// span is one long string value of the body, quotes included.
type span struct{ start, end int }

// fingerprintLarge is Fingerprint for a body that passed precheckJSON.
func fingerprintLarge(body []byte) (string, error) {
	spans := longValues(body)
	if len(spans) == 0 {
		return fingerprintSmall(body)
	}
	var nonceBytes [16]byte
	if _, err := rand.Read(nonceBytes[:]); err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	// The nonce is new on every call and does not occur in the body, so a
	// placeholder in jcs's output can only be one of ours.
	nonce := "\x1fso" + hex.EncodeToString(nonceBytes[:]) // written by jcs as \u001fso…
	tag := []byte(`"\u001fso` + nonce[3:])
	if bytes.Contains(body, []byte(nonce[3:])) {
		return fingerprintSmall(body) // cannot happen in practice; stay exact
	}
	reduced := make([]byte, 0, len(body)-sumLen(spans)+len(spans)*64)
	last := 0
	for i, sp := range spans {
		reduced = append(reduced, body[last:sp.start]...)
		reduced = append(reduced, tag...)
		reduced = strconv.AppendInt(reduced, int64(i), 10)
		reduced = append(reduced, '"')
		last = sp.end
	}
	reduced = append(reduced, body[last:]...)
	canonical, err := jcs.Transform(reduced)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	h := sha256.New()
	for {
		at := bytes.Index(canonical, tag)
		if at < 0 {
			h.Write(canonical)
			break
		}
		h.Write(canonical[:at])
		rest := canonical[at+len(tag):]
		end := bytes.IndexByte(rest, '"')
		n, err := strconv.Atoi(string(rest[:end]))
		if err != nil || n < 0 || n >= len(spans) {
			return "", fmt.Errorf("fingerprint: placeholder %q lost", rest[:end])
		}
		h.Write(body[spans[n].start:spans[n].end])
		canonical = rest[end+1:]
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fingerprintSmall(body []byte) (string, error) {
	canonical, err := jcs.Transform(body)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// longValues finds the string values (not member names) of at least
// longString bytes whose canonical form is their raw bytes: no escape, no
// control character.
func longValues(body []byte) []span {
	var out []span
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		end := skipJSONString(body, i+1) // the closing quote
		if end-i-1 >= longString && plainString(body[i+1:end]) && !isMemberName(body, end+1) {
			out = append(out, span{i, end + 1})
		}
		i = end
	}
	return out
}

func plainString(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

// isMemberName reports whether the string that ended before i is followed
// by a colon.
func isMemberName(body []byte, i int) bool {
	for ; i < len(body); i++ {
		switch body[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

func sumLen(spans []span) int {
	n := 0
	for _, s := range spans {
		n += s.end - s.start
	}
	return n
}
