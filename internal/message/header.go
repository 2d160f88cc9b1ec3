package message

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/mail"
	"strings"
	"unicode/utf8"
)

const (
	// maxLineLen is the RFC 5322 §2.1.1 hard limit, excluding CRLF.
	maxLineLen = 998
	// softLineLen is the RFC 5322 §2.1.1 SHOULD limit for raw header text.
	softLineLen = 78
	// encodedLineLen is the RFC 2047 §2 limit for a header line that carries
	// encoded-words; it is stricter than softLineLen, so honour it there.
	encodedLineLen = 76
	// maxWordLen is the RFC 2047 §2 limit for one encoded-word.
	maxWordLen = 75
	// maxNameLen bounds extra header names. RFC 5322 sets no limit of its own,
	// but a name must leave room on its first line for at least one
	// encoded-word of the value, and no real header name comes close.
	maxNameLen = 76
	// maxTokenLen bounds a run of address text that fold cannot break, so it
	// fits on a line even after the longest address prefix and a separator.
	maxTokenLen = maxLineLen - len("Reply-To: ") - len(",")
	// maxMsgIDLen keeps a msg-id on one line after "In-Reply-To: ", the
	// longest prefix a msg-id is written after.
	maxMsgIDLen = maxLineLen - len("In-Reply-To: ")
)

// HeaderError reports a header name or value that Build refuses to render,
// because it is unsafe (it could inject header lines), malformed, or reserved
// for the service.
type HeaderError struct {
	// Field is the header field the problem belongs to, e.g. "Subject", "To",
	// or the caller's name for an extra header. It may itself be the unsafe
	// text, so format it quoted, as Error does.
	Field string
	// Reason says what is wrong, in words fit for an API error message.
	Reason string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("message: header %q: %s", e.Field, e.Reason)
}

// HasLineBreak reports whether s contains CR, LF or NUL. Any of them in text
// that lands in a header could end the field early and start a new one, so
// callers reject them in every field they control.
func HasLineBreak(s string) bool {
	return strings.ContainsAny(s, "\r\n\x00")
}

// CheckHeader validates one caller-supplied extra header. The name must be a
// valid RFC 5322 field name and not one the service controls; the value must
// be valid UTF-8 without CR, LF or NUL. It returns *HeaderError, and accepts
// exactly the headers Build accepts, so a send validated at the API edge cannot
// fail to render later.
func CheckHeader(name, value string) error {
	if err := checkFieldName(name); err != nil {
		return err
	}
	if reservedHeader(name) {
		return &HeaderError{Field: name, Reason: "reserved header: set by the service"}
	}
	return checkText(name, "", value)
}

func checkFieldName(name string) error {
	if name == "" {
		return &HeaderError{Field: name, Reason: "empty field name"}
	}
	if len(name) > maxNameLen {
		return &HeaderError{Field: name, Reason: fmt.Sprintf("field name longer than %d octets", maxNameLen)}
	}
	for i := 0; i < len(name); i++ {
		// RFC 5322 §3.6.8: ftext is printable US-ASCII except ':'; this also
		// excludes space, which would otherwise make the line unparseable.
		if c := name[i]; c < 33 || c > 126 || c == ':' {
			return &HeaderError{Field: name, Reason: "invalid field name: only printable ASCII without spaces or ':' is allowed"}
		}
	}
	return nil
}

// reservedHeader reports whether name is a header the service writes itself
// (or that only relays may add), so a caller copy would duplicate or spoof it.
func reservedHeader(name string) bool {
	switch strings.ToLower(name) {
	case "from", "to", "cc", "bcc", "reply-to", "subject", "date",
		"message-id", "mime-version", "content-type", "content-transfer-encoding",
		"in-reply-to", "references", "return-path", "received",
		"dkim-signature", "sender":
		return true
	}
	return false
}

// checkText rejects header text that cannot be rendered safely: line breaks
// and NUL could inject fields, and invalid UTF-8 cannot be carried in a UTF-8
// encoded-word without being mangled.
//
// what names the part of the field being checked, for the error message.
func checkText(field, what, s string) error {
	if HasLineBreak(s) {
		return &HeaderError{Field: field, Reason: what + "contains CR, LF or NUL"}
	}
	if !utf8.ValidString(s) {
		return &HeaderError{Field: field, Reason: what + "not valid UTF-8"}
	}
	return nil
}

// checkMsgID accepts "<left@right>" where both sides are printable ASCII
// without angle brackets. It is looser than RFC 5322's msg-id on purpose:
// In-Reply-To and References echo ids minted by other mail systems, and what
// matters here is that the id cannot break out of its header or its brackets.
func checkMsgID(field, id string) error {
	if len(id) > maxMsgIDLen {
		return &HeaderError{Field: field, Reason: fmt.Sprintf("msg-id longer than %d octets", maxMsgIDLen)}
	}
	if len(id) < len("<a@b>") || id[0] != '<' || id[len(id)-1] != '>' {
		return &HeaderError{Field: field, Reason: "msg-id must look like <id@domain>"}
	}
	inner := id[1 : len(id)-1]
	for i := 0; i < len(inner); i++ {
		if c := inner[i]; c < 33 || c > 126 || c == '<' || c == '>' {
			return &HeaderError{Field: field, Reason: "msg-id contains whitespace, control, non-ASCII or angle-bracket characters"}
		}
	}
	at := strings.LastIndexByte(inner, '@')
	if at <= 0 || at == len(inner)-1 {
		return &HeaderError{Field: field, Reason: "msg-id must look like <id@domain>"}
	}
	return nil
}

// headerWriter accumulates the header section. The first error sticks, so
// Build can write fields in order and check once.
type headerWriter struct {
	b   *bytes.Buffer
	err error
}

// writeLines emits one field from pre-folded lines, enforcing the hard line
// limit as a final guard in case some path failed to fold.
func (w *headerWriter) writeLines(field string, lines []string) {
	if w.err != nil {
		return
	}
	for _, l := range lines {
		if len(l) > maxLineLen {
			w.err = &HeaderError{Field: field, Reason: fmt.Sprintf("cannot be folded into lines of at most %d octets", maxLineLen)}
			return
		}
	}
	for _, l := range lines {
		w.b.WriteString(l)
		w.b.WriteString("\r\n")
	}
}

// writeStructured writes a field whose value is already in wire form, folding
// it at whitespace.
func (w *headerWriter) writeStructured(name, value string) {
	w.writeLines(name, fold(name, value, softLineLen))
}

// writeUnstructured writes free text such as a Subject. Text that is plain
// printable ASCII is written as is, folded at single spaces; anything else
// becomes encoded-words.
//
// literal is set for text that must read back exactly as given (the
// Subject). Such text is encoded even when it is plain ASCII if, written raw,
// it would not read back the same: leading or trailing whitespace is trimmed
// by parsers, and "=?" may be taken for an encoded-word. Caller extra headers
// are written raw whenever they are plain ASCII, since they may be structured
// (List-Unsubscribe) or deliberately pre-encoded.
func (w *headerWriter) writeUnstructured(name, value string, literal bool) {
	if w.err != nil {
		return
	}
	if err := checkText(name, "", value); err != nil {
		w.err = err
		return
	}
	if value == "" {
		w.writeLines(name, []string{name + ":"})
		return
	}
	if plainASCII(value) && (!literal || readsBackRaw(value)) {
		lines := fold(name, value, softLineLen)
		if longest(lines) <= maxLineLen {
			w.writeLines(name, lines)
			return
		}
		// A run too long to fold: encoded-words can be split anywhere.
	}
	first := encodedLineLen - len(name) - len(": ")
	words := encodeWords(value, first, qLen(value) <= bLen(len(value)))
	w.writeLines(name, fold(name, strings.Join(words, " "), encodedLineLen))
}

// plainASCII reports whether s can appear raw in a header: printable ASCII,
// space and tab only.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return false
		}
	}
	return true
}

func readsBackRaw(s string) bool {
	return !isWSP(s[0]) && !isWSP(s[len(s)-1]) && !strings.Contains(s, "=?")
}

func isWSP(c byte) bool { return c == ' ' || c == '\t' }

func longest(lines []string) int {
	n := 0
	for _, l := range lines {
		n = max(n, len(l))
	}
	return n
}

// fold renders "name: value" as lines no longer than limit where value allows.
//
// It folds only at a single space between two non-whitespace octets. Parsers
// (net/textproto, go-message) unfold by trimming whitespace around the line
// break and joining with one space, so folding there, and only there, reads
// back as exactly the original value. A run with no such space is left whole
// even if it exceeds limit; callers check the hard limit.
func fold(name, value string, limit int) []string {
	first := name + ": "
	if len(first)+len(value) <= limit {
		return []string{first + value}
	}
	var lines []string
	cur, base, lastFit := 0, len(first), -1
	emit := func(end int) {
		if len(lines) == 0 {
			lines = append(lines, first+value[cur:end])
		} else {
			lines = append(lines, value[cur:end])
		}
		cur, base = end, 0
	}
	for p := 1; p < len(value)-1; p++ {
		if value[p] != ' ' || isWSP(value[p-1]) || isWSP(value[p+1]) {
			continue
		}
		if base+p-cur > limit && lastFit > cur {
			emit(lastFit)
		}
		if base+p-cur > limit {
			// Even alone this run overflows; break as early as possible.
			emit(p)
			continue
		}
		lastFit = p
	}
	if base+len(value)-cur > limit && lastFit > cur {
		emit(lastFit)
	}
	emit(len(value))
	return lines
}

// RFC 2047 encoded-word framing. The charset is always UTF-8 and lower case,
// matching what the mime package emits.
const (
	wordPrefixQ  = "=?utf-8?q?"
	wordPrefixB  = "=?utf-8?b?"
	wordSuffix   = "?="
	wordOverhead = len(wordPrefixQ) + len(wordSuffix)
)

// encodeWords splits s into encoded-words: the first at most firstLen octets,
// the rest at most maxWordLen. It does this itself rather than through
// mime.WordEncoder because that encoder cannot size the first word to the
// field name, leaves ASCII-only text unencoded (fatal when the reason for
// encoding is an over-long run), and never folds.
//
// Words never split a UTF-8 sequence (RFC 2047 §5). Callers choose Q or B
// once per value (Q when it is no longer than B, so mostly-ASCII text stays
// readable on the wire) because mixing them buys nothing.
func encodeWords(s string, firstLen int, useQ bool) []string {
	words := make([]string, 0, len(s)/40+1)
	limit := firstLen
	for len(s) > 0 {
		avail := limit - wordOverhead
		n, enc := 0, 0
		for n < len(s) {
			_, size := utf8.DecodeRuneInString(s[n:])
			next := bLen(n + size)
			if useQ {
				next = enc + qLen(s[n:n+size])
			}
			// Always take one rune, so a tight first line cannot stall us.
			if next > avail && n > 0 {
				break
			}
			n, enc = n+size, next
		}
		words = append(words, encodeWord(s[:n], useQ))
		s = s[n:]
		limit = maxWordLen
	}
	return words
}

// qSafe reports whether c may appear literally in Q-encoded text. This is the
// RFC 2047 §5(3) set, the strictest context, minus '=' and '_' which Q uses.
func qSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '!' || c == '*' || c == '+' || c == '-' || c == '/'
}

func qLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if qSafe(s[i]) || s[i] == ' ' {
			n++
		} else {
			n += 3
		}
	}
	return n
}

func bLen(n int) int { return (n + 2) / 3 * 4 }

func encodeWord(s string, useQ bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	if !useQ {
		b.Grow(wordOverhead + bLen(len(s)))
		b.WriteString(wordPrefixB)
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(s)))
		b.WriteString(wordSuffix)
		return b.String()
	}
	b.Grow(wordOverhead + qLen(s))
	b.WriteString(wordPrefixQ)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case qSafe(c):
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('_')
		default:
			b.WriteByte('=')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0x0f])
		}
	}
	b.WriteString(wordSuffix)
	return b.String()
}

// renderAddressList renders addresses the way net/mail.Address.String does,
// comma-separated and ready for folding.
func renderAddressList(field string, addrs []mail.Address) (string, error) {
	parts := make([]string, len(addrs))
	for i := range addrs {
		what := ""
		if len(addrs) > 1 {
			what = fmt.Sprintf("address %d: ", i+1)
		}
		s, err := renderAddress(field, what, &addrs[i])
		if err != nil {
			return "", err
		}
		parts[i] = s
	}
	return strings.Join(parts, ", "), nil
}

// renderAddress renders one address and proves it safe by parsing it back.
//
// net/mail quotes or encodes the display name, but writes the domain verbatim,
// so an Address of "a@b>, <evil" would render a second recipient; requiring
// the rendering to parse back to the same name and address closes that and any
// similar gap in one place.
func renderAddress(field, what string, a *mail.Address) (string, error) {
	if err := checkText(field, what+"display name ", a.Name); err != nil {
		return "", err
	}
	if err := checkText(field, what+"address ", a.Address); err != nil {
		return "", err
	}
	if a.Address == "" {
		return "", &HeaderError{Field: field, Reason: what + "empty address"}
	}
	angle := (&mail.Address{Address: a.Address}).String()
	if len(angle) > maxTokenLen {
		return "", &HeaderError{Field: field, Reason: what + "address too long"}
	}
	s := a.String()
	// Fall back to B-encoding the name ourselves when net/mail's rendering
	// cannot be folded (a long quoted name without spaces) or does not read
	// back (its Q-encoding leaves phrase-unsafe characters such as '\' bare).
	// B is always allowed inside a phrase (RFC 2047 §5(3)).
	if a.Name != "" && (longestRun(s) > maxTokenLen || !parsesBackTo(s, a)) {
		s = strings.Join(encodeWords(a.Name, maxWordLen, false), " ") + " " + angle
	}
	if !parsesBackTo(s, a) {
		return "", &HeaderError{Field: field, Reason: fmt.Sprintf("%saddress %q does not render unambiguously", what, a.Address)}
	}
	return s, nil
}

func parsesBackTo(s string, a *mail.Address) bool {
	back, err := mail.ParseAddress(s)
	return err == nil && back.Address == a.Address && back.Name == a.Name
}

// longestRun is the length of the longest stretch of s that fold cannot
// break, i.e. between single spaces flanked by non-whitespace.
func longestRun(s string) int {
	best, start := 0, 0
	for p := 1; p < len(s)-1; p++ {
		if s[p] == ' ' && !isWSP(s[p-1]) && !isWSP(s[p+1]) {
			best = max(best, p-start)
			start = p
		}
	}
	return max(best, len(s)-start)
}
