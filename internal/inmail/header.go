package inmail

import (
	"bytes"
	"errors"
)

// Bounds of a message's header block. A stranger chooses the header, and
// every parser we hand it to (net/mail, go-message, the DKIM verifier)
// keeps each field as strings and slices: a 10 MB header of 2 million
// "A:b" lines cost over 100 MiB in each. Real mail has tens of fields and
// a few KiB; a DKIM-signed list message with a long trace, a few hundred.
const (
	MaxHeaderFields = 1000
	MaxHeaderBytes  = 1 << 20
)

// ErrHeaderTooLarge is a header block past MaxHeaderFields or
// MaxHeaderBytes (SMTP answers it 552 5.3.4, RFC 3463: message too big
// for the system).
var ErrHeaderTooLarge = errors.New("the message header has more than 1,000 fields or 1 MiB")

// HeaderSize returns the length of raw's header block, the blank line
// that ends it included (all of raw when nothing ends it), or
// ErrHeaderTooLarge. It reads raw in place and allocates nothing, so it
// can run before any parser: raw[:n] is then the whole header, within the
// bounds, for the parsers that need only the header.
func HeaderSize(raw []byte) (int, error) {
	fields, off := 0, 0
	for off < len(raw) {
		end := len(raw)
		if i := bytes.IndexByte(raw[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		line := raw[off:end]
		if string(line) == "\r\n" || string(line) == "\n" {
			return end, nil // the blank line: the body starts after it
		}
		if end > MaxHeaderBytes {
			return 0, ErrHeaderTooLarge
		}
		off = end
		if line[0] != ' ' && line[0] != '\t' {
			// A field (or a malformed line a parser would stop at,
			// counted all the same so that the bound does not depend on
			// which parser runs); a line starting with white space
			// continues the field before it.
			if fields++; fields > MaxHeaderFields {
				return 0, ErrHeaderTooLarge
			}
		}
	}
	return off, nil
}
