package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"
)

// Message is everything needed to render one email.
type Message struct {
	From    mail.Address
	To, Cc  []mail.Address
	ReplyTo []mail.Address
	// There is deliberately no Bcc: Bcc recipients are envelope-only and
	// never appear in the rendered headers.

	Subject string
	// Text and HTML are the bodies; at least one must be non-empty. With both,
	// the message is multipart/alternative (text first, so clients that
	// prefer the last part they understand show the HTML); with one, it is a
	// single part.
	Text, HTML string
	// MessageID includes the angle brackets, e.g. "<snd_01H...@example.com>".
	// It also seeds the MIME boundary, which keeps Build deterministic.
	MessageID string
	Date      time.Time
	// InReplyTo is an optional msg-id with brackets. It sets In-Reply-To and
	// is appended to References, as RFC 5322 §3.6.4 prescribes for replies.
	InReplyTo  string
	References []string
	// Headers are extra caller headers, written last and in order.
	Headers []Header
}

// Header is one extra caller-supplied header field.
type Header struct{ Name, Value string }

// ErrNoBody is returned (wrapped) by Build when Text and HTML are both empty.
var ErrNoBody = errors.New("message: no body: Text and HTML are both empty")

// Build renders m as the exact bytes to hand to the SMTP relay. It returns
// *HeaderError when a header name or value is unsafe, malformed or reserved,
// and never a partially rendered message.
//
// The output depends only on m, so rendering the same stored send again on a
// retry yields identical bytes.
func Build(m *Message) ([]byte, error) { return BuildWithAttachments(m, nil) }

// BuildWithAttachments renders m like Build with atts: files whose
// ContentID is set are inline parts beside the HTML (multipart/related),
// the others follow the body in multipart/mixed. Without attachments it is
// Build. Like Build it is deterministic, so every attempt of a send hands
// over the same bytes.
func BuildWithAttachments(m *Message, atts []Attachment) ([]byte, error) {
	if err := checkMessage(m); err != nil {
		return nil, err
	}
	// refs stays in this function (not returned by a step), so that the
	// compiler can keep a short one on the stack.
	refs := references(m.References, m.InReplyTo)
	for _, id := range refs {
		if err := checkMsgID("References", id); err != nil {
			return nil, err
		}
	}
	addrs, err := renderAddresses(m)
	if err != nil {
		return nil, err
	}
	if err := checkExtras(m, atts); err != nil {
		return nil, err
	}
	// The fields are written in three runs around the body's own, each
	// into its buffer; a field that cannot be written sticks in w.err,
	// which is checked once, after the body was framed.
	var head, content, rest bytes.Buffer
	w := headerWriter{b: &head}
	writeLeadingFields(&w, m, addrs)
	body, err := bodyEntity(m, atts)
	if err != nil {
		return nil, err
	}
	w.b = &content
	w.writeStructured("Content-Type", body.ctype)
	if body.cte != "" {
		w.writeStructured("Content-Transfer-Encoding", body.cte)
	}
	w.b = &rest
	writeTrailingFields(&w, m, refs)
	if w.err != nil {
		return nil, w.err
	}
	var buf bytes.Buffer
	buf.Grow(head.Len() + content.Len() + rest.Len() + 2 + body.size)
	buf.Write(head.Bytes())
	buf.Write(content.Bytes())
	buf.Write(rest.Bytes())
	buf.WriteString("\r\n")
	if err := body.write(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkMessage checks what every message needs: a body, a date, its
// Message-ID and, for a reply, its parent's.
func checkMessage(m *Message) error {
	if m == nil {
		return errors.New("message: build: nil *Message")
	}
	if m.Text == "" && m.HTML == "" {
		return fmt.Errorf("message: build %q: %w", m.MessageID, ErrNoBody)
	}
	if m.Date.IsZero() {
		return &HeaderError{Field: "Date", Reason: "not set"}
	}
	if y := m.Date.Year(); y < 1900 || y > 9999 {
		// RFC 5322 §3.3 wants a four-digit year (and parsers choke on more).
		return &HeaderError{Field: "Date", Reason: fmt.Sprintf("year %d out of range", y)}
	}
	if err := checkMsgID("Message-ID", m.MessageID); err != nil {
		return err
	}
	if m.InReplyTo != "" {
		if err := checkMsgID("In-Reply-To", m.InReplyTo); err != nil {
			return err
		}
	}
	return nil
}

// addressFields are a message's address fields in wire form; "" for an
// empty list.
type addressFields struct{ from, to, cc, replyTo string }

func renderAddresses(m *Message) (addressFields, error) {
	var a addressFields
	var err error
	if a.from, err = renderAddressList("From", []mail.Address{m.From}); err != nil {
		return a, err
	}
	if a.to, err = renderAddressList("To", m.To); err != nil {
		return a, err
	}
	if a.cc, err = renderAddressList("Cc", m.Cc); err != nil {
		return a, err
	}
	a.replyTo, err = renderAddressList("Reply-To", m.ReplyTo)
	return a, err
}

// checkExtras checks the caller's headers and attachments, so that
// nothing is rendered for a message that cannot be built.
func checkExtras(m *Message, atts []Attachment) error {
	for _, h := range m.Headers {
		if err := CheckHeader(h.Name, h.Value); err != nil {
			return err
		}
	}
	for i, a := range atts {
		if err := checkAttachment(a); err != nil {
			return fmt.Errorf("message: build %s: attachment %d: %w", m.MessageID, i, err)
		}
	}
	return nil
}

// writeLeadingFields writes the fields before the body's Content-Type:
// date, ids, addresses, subject and MIME-Version.
func writeLeadingFields(w *headerWriter, m *Message, a addressFields) {
	// RFC1123Z is the RFC 5322 date-time form with a numeric zone.
	w.writeLines("Date", []string{"Date: " + m.Date.Format(time.RFC1123Z)})
	w.writeLines("Message-ID", []string{"Message-ID: " + m.MessageID})
	w.writeStructured("From", a.from)
	// To is omitted rather than faked when every recipient is Bcc; RFC 5322
	// only requires Date and From.
	if a.to != "" {
		w.writeStructured("To", a.to)
	}
	if a.cc != "" {
		w.writeStructured("Cc", a.cc)
	}
	if a.replyTo != "" {
		w.writeStructured("Reply-To", a.replyTo)
	}
	w.writeUnstructured("Subject", m.Subject, true)
	w.writeLines("MIME-Version", []string{"MIME-Version: 1.0"})
}

// writeTrailingFields writes the fields after the body's: the thread and
// the caller's headers, last and in order.
func writeTrailingFields(w *headerWriter, m *Message, refs []string) {
	if m.InReplyTo != "" {
		w.writeLines("In-Reply-To", []string{"In-Reply-To: " + m.InReplyTo})
	}
	if len(refs) > 0 {
		w.writeStructured("References", strings.Join(refs, " "))
	}
	for _, h := range m.Headers {
		w.writeUnstructured(h.Name, h.Value, false)
	}
}

// writeQP writes s quoted-printable with every CR, LF and CRLF in s turned
// into a CRLF line break.
//
// The normalisation is done here, not left to quotedprintable.Writer, because
// the writer loses a line break when a bare CR is followed by a byte it has to
// escape and then an LF ("\r\xe3\n" comes out as one break, not two): its
// "previous byte was CR" flag is not cleared by escaped bytes. Feeding it only
// CRLF pairs sidesteps that.
func writeQP(w io.Writer, s string) error {
	qp := quotedprintable.NewWriter(w)
	crlf := []byte("\r\n")
	// One conversion up front; the writer takes []byte and the body may be
	// many lines.
	b := []byte(s)
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			if _, err := qp.Write(b); err != nil {
				return err
			}
			break
		}
		if _, err := qp.Write(b[:i]); err != nil {
			return err
		}
		if _, err := qp.Write(crlf); err != nil {
			return err
		}
		if bytes.HasPrefix(b[i:], crlf) {
			i++
		}
		b = b[i+1:]
	}
	return qp.Close()
}

// boundaryFor derives the MIME boundary from the Message-ID so that every
// rendering of a send is identical. The "=_" prefix makes it impossible for
// quoted-printable body text to contain the delimiter: quoted-printable only
// emits '=' before two hex digits or a line break, never before '_'. That
// matters because the boundary is predictable to anyone who knows the id.
func boundaryFor(messageID string) string {
	sum := sha256.Sum256([]byte(messageID))
	return "=_" + hex.EncodeToString(sum[:16])
}

// references returns refs with inReplyTo appended unless already present, so
// a reply's References always ends with (or at least contains) its parent.
func references(refs []string, inReplyTo string) []string {
	if inReplyTo == "" {
		return refs
	}
	for _, r := range refs {
		if r == inReplyTo {
			return refs
		}
	}
	out := make([]string, 0, len(refs)+1)
	return append(append(out, refs...), inReplyTo)
}

// NewMessageID returns "<sendID@domain>", where domain is the part of
// fromAddress after its last '@'. Using the sender's domain keeps the id
// globally unique per RFC 5322 §3.6.4 and aligned with the From domain.
// When there is no usable domain it falls back to "localhost", so the result
// is always well-formed as long as sendID is printable ASCII.
func NewMessageID(sendID, fromAddress string) string {
	domain := "localhost"
	if at := strings.LastIndexByte(fromAddress, '@'); at >= 0 && dotAtom(fromAddress[at+1:]) {
		domain = fromAddress[at+1:]
	}
	return "<" + sendID + "@" + domain + ">"
}

// dotAtom reports whether s is RFC 5322 dot-atom-text in ASCII.
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 33 || c > 126 || strings.IndexByte(`()<>[]:;@\,"`, c) >= 0 {
			return false
		}
	}
	return true
}
