package inmail

import (
	"bytes"
	"errors"
	"mime"
	"strings"
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

// CheckHeaders applies the header bounds to every header block of raw:
// the message's, and each MIME part's at any depth (go-message reads a
// part's header as it does the message's, keeping every field). It
// follows the multipart boundaries itself, allocation-free but for each
// multipart header's Content-Type, so it can run before any parser; it
// stops at MaxDepth and MaxParts, past which the parse refuses anyway.
func CheckHeaders(raw []byte) error {
	n, err := HeaderSize(raw)
	if err != nil {
		return err
	}
	parts := 0
	return checkParts(raw[:n], raw[n:], 0, &parts)
}

func checkParts(header, body []byte, depth int, parts *int) error {
	if depth >= MaxDepth {
		return nil
	}
	boundary := multipartBoundary(header)
	if boundary == "" {
		return nil
	}
	delim := []byte("--" + boundary)
	for off := 0; off < len(body) && *parts < MaxParts; {
		start, after, closing := nextDelimiter(body, off, delim)
		if start < 0 || closing {
			return nil
		}
		end, _, _ := nextDelimiter(body, after, delim)
		if end < 0 {
			end = len(body)
		}
		*parts++
		part := body[after:end]
		n, err := HeaderSize(part)
		if err != nil {
			return err
		}
		if err := checkParts(part[:n], part[n:], depth+1, parts); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// nextDelimiter finds the next line of body, from off, that is delim
// (RFC 2046 5.1.1: at the start of a line, then optional white space, or
// "--" closing the multipart): its start, where the line after it
// starts, and whether it closes; start -1 when there is none.
func nextDelimiter(body []byte, off int, delim []byte) (start, after int, closing bool) {
	for off < len(body) {
		i := bytes.Index(body[off:], delim)
		if i < 0 {
			return -1, 0, false
		}
		i += off
		off = i + len(delim)
		if i > 0 && body[i-1] != '\n' {
			continue
		}
		lineEnd := len(body)
		if j := bytes.IndexByte(body[off:], '\n'); j >= 0 {
			lineEnd = off + j + 1
		}
		rest := bytes.TrimRight(body[off:lineEnd], " \t\r\n")
		switch {
		case len(rest) == 0:
			return i, lineEnd, false
		case bytes.HasPrefix(rest, []byte("--")):
			return i, lineEnd, true
		}
	}
	return -1, 0, false
}

// multipartBoundary is the boundary of a multipart header's Content-Type,
// "" for any other header.
func multipartBoundary(header []byte) string {
	v := fieldValue(header, "content-type")
	if v == "" {
		return ""
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return ""
	}
	return params["boundary"]
}

// fieldValue is the unfolded value of header's first field named name
// (lower case), "" when there is none.
func fieldValue(header []byte, name string) string {
	for off := 0; off < len(header); {
		end := len(header)
		if i := bytes.IndexByte(header[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		line := header[off:end]
		off = end
		colon := bytes.IndexByte(line, ':')
		if colon < 0 || line[0] == ' ' || line[0] == '\t' || !bytes.EqualFold(bytes.TrimSpace(line[:colon]), []byte(name)) {
			continue
		}
		var b strings.Builder
		b.Write(bytes.TrimSpace(line[colon+1:]))
		for off < len(header) && (header[off] == ' ' || header[off] == '\t') {
			end := len(header)
			if i := bytes.IndexByte(header[off:], '\n'); i >= 0 {
				end = off + i + 1
			}
			b.WriteByte(' ')
			b.Write(bytes.TrimSpace(header[off:end]))
			off = end
		}
		return b.String()
	}
	return ""
}
