package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Attachment is one file attached to a message.
type Attachment struct {
	// ContentType is the MIME type with any parameters, e.g.
	// "application/pdf" or "message/rfc822" for a forwarded message, which
	// is embedded as is (7bit or 8bit); every other type is
	// base64-encoded.
	ContentType string
	// Filename is offered to the recipient (Content-Disposition): quoted
	// when it is printable ASCII, else encoded as RFC 2231 says. "" for
	// none.
	Filename string
	// ContentID, without angle brackets, makes the part inline: the HTML
	// refers to it as "cid:…". With no HTML it is an attachment that
	// carries a Content-ID.
	ContentID string
	Data      []byte
}

// MaxContentIDLen bounds a Content-ID (without its brackets).
const MaxContentIDLen = 128

// entity is one MIME entity before it is framed: its content header
// fields, and its encoded body, which write appends to the message being
// built (size bytes of it): a file is encoded once, straight into the
// message, not into a part that is then copied.
type entity struct {
	ctype  string   // Content-Type value, in wire form
	cte    string   // Content-Transfer-Encoding; "" for none (multipart)
	fields []string // further fields, whole lines without CRLF
	size   int
	write  func(b *bytes.Buffer) error
}

// bytesEntity is an entity whose body is already encoded.
func bytesEntity(ctype, cte string, body []byte) *entity {
	return &entity{ctype: ctype, cte: cte, size: len(body), write: func(b *bytes.Buffer) error {
		b.Write(body)
		return nil
	}}
}

// writeHeader writes e's header fields, folded like every other field.
func (e *entity) writeHeader(w *headerWriter) {
	w.writeStructured("Content-Type", e.ctype)
	for _, f := range e.fields {
		name, _, _ := strings.Cut(f, ":")
		w.writeLines(name, []string{f})
	}
	if e.cte != "" {
		w.writeStructured("Content-Transfer-Encoding", e.cte)
	}
}

// bodyEntity is the message body as one entity: the text and HTML
// (alternative when both), the HTML with its inline parts (related), and
// the attachments after it all (mixed).
func bodyEntity(m *Message, atts []Attachment) (*entity, error) {
	var inline, attached []Attachment
	for _, a := range atts {
		if a.ContentID != "" && m.HTML != "" {
			inline = append(inline, a)
		} else {
			attached = append(attached, a)
		}
	}
	// A text or HTML part that is the whole body ends in a soft line
	// break when it does not end in CRLF: the message ends with CRLF, as
	// SMTP will send it, and the decoded body gains no newline.
	standalone := m.Text == "" || m.HTML == ""
	var text, html *entity
	var err error
	if m.Text != "" {
		if text, err = qpEntity("text/plain; charset=utf-8", m.Text, standalone && len(inline) == 0); err != nil {
			return nil, fmt.Errorf("message: build %s: encode text: %w", m.MessageID, err)
		}
	}
	if m.HTML != "" {
		if html, err = qpEntity("text/html; charset=utf-8", m.HTML, standalone && len(inline) == 0); err != nil {
			return nil, fmt.Errorf("message: build %s: encode html: %w", m.MessageID, err)
		}
	}
	if len(inline) > 0 {
		parts := []*entity{html}
		for _, a := range inline {
			parts = append(parts, attachmentEntity(a))
		}
		if html, err = multipartEntity(`related; type="text/html"`, partBoundary("r", m.MessageID, inline), parts); err != nil {
			return nil, err
		}
	}
	body := text
	switch {
	case text != nil && html != nil:
		if body, err = multipartEntity("alternative", boundaryFor(m.MessageID), []*entity{text, html}); err != nil {
			return nil, err
		}
	case html != nil:
		body = html
	}
	if len(attached) == 0 {
		return body, nil
	}
	parts := []*entity{body}
	for _, a := range attached {
		parts = append(parts, attachmentEntity(a))
	}
	return multipartEntity("mixed", partBoundary("m", m.MessageID, attached), parts)
}

func qpEntity(ctype, s string, standalone bool) (*entity, error) {
	var b bytes.Buffer
	b.Grow(len(s) + len(s)/8 + 16) // quoted-printable grows typical text by a few percent
	if err := writeQP(&b, s); err != nil {
		return nil, err
	}
	if standalone && !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("=\r\n")
	}
	return bytesEntity(ctype, "quoted-printable", b.Bytes()), nil
}

// multipartEntity frames parts under boundary. The CRLF before each delimiter
// belongs to the delimiter (RFC 2046 §5.1.1), so every part decodes to
// exactly its content.
func multipartEntity(subtype, boundary string, parts []*entity) (*entity, error) {
	// The part headers are rendered now, so that a field that cannot be
	// written fails the build before any body is.
	headers := make([][]byte, len(parts))
	size := len(boundary) + 8
	for i, p := range parts {
		var h bytes.Buffer
		w := headerWriter{b: &h}
		if p.writeHeader(&w); w.err != nil {
			return nil, w.err
		}
		headers[i] = h.Bytes()
		size += len(boundary) + 8 + len(headers[i]) + p.size
	}
	ctype := "multipart/" + subtype + `; boundary="` + boundary + `"`
	return &entity{ctype: ctype, size: size, write: func(b *bytes.Buffer) error {
		for i, p := range parts {
			b.WriteString("--" + boundary + "\r\n")
			b.Write(headers[i])
			b.WriteString("\r\n")
			if err := p.write(b); err != nil {
				return err
			}
			b.WriteString("\r\n")
		}
		b.WriteString("--" + boundary + "--\r\n")
		return nil
	}}, nil
}

// attachmentEntity is one file's part: base64 in lines of 76, encoded
// straight into its buffer (a 10 MiB file is not copied twice more), or a
// forwarded message as it is.
func attachmentEntity(a Attachment) *entity {
	mt, params, _ := mime.ParseMediaType(a.ContentType) // checked by checkAttachment
	e := &entity{ctype: mime.FormatMediaType(mt, params)}
	disp := "attachment"
	if a.ContentID != "" {
		disp = "inline"
	}
	e.fields = append(e.fields, "Content-Disposition: "+disposition(disp, a.Filename))
	if a.ContentID != "" {
		e.fields = append(e.fields, "Content-ID: <"+a.ContentID+">")
	}
	if mt == "message/rfc822" {
		e.cte = "7bit"
		if !isASCIIBytes(a.Data) {
			e.cte = "8bit"
		}
		e.size, e.write = len(a.Data), func(b *bytes.Buffer) error {
			b.Write(a.Data)
			return nil
		}
		return e
	}
	e.cte = "base64"
	const lineIn = 57 // bytes that encode to a line of 76
	lines := (len(a.Data) + lineIn - 1) / lineIn
	e.size = base64.StdEncoding.EncodedLen(len(a.Data)) + 2*lines
	e.write = func(b *bytes.Buffer) error {
		var line [76]byte
		for data := a.Data; len(data) > 0; {
			n := min(lineIn, len(data))
			base64.StdEncoding.Encode(line[:], data[:n])
			b.Write(line[:base64.StdEncoding.EncodedLen(n)])
			data = data[n:]
			if len(data) > 0 { // the last line's CRLF belongs to the delimiter
				b.WriteString("\r\n")
			}
		}
		return nil
	}
	return e
}

// disposition renders a Content-Disposition value: a filename that is
// printable ASCII without quotes or backslashes quoted as it is, any
// other one as an RFC 2231 parameter (filename*=utf-8”…).
func disposition(kind, filename string) string {
	if filename == "" {
		return kind
	}
	simple := true
	for i := 0; i < len(filename); i++ {
		if c := filename[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			simple = false
			break
		}
	}
	if simple {
		return kind + `; filename="` + filename + `"`
	}
	return mime.FormatMediaType(kind, map[string]string{"filename": filename})
}

func checkAttachment(a Attachment) error {
	mt, _, err := mime.ParseMediaType(a.ContentType)
	if err != nil || !strings.Contains(mt, "/") || strings.HasPrefix(mt, "multipart/") || HasLineBreak(a.ContentType) || !plainASCII(a.ContentType) {
		return fmt.Errorf("invalid content type %q", a.ContentType)
	}
	if !utf8.ValidString(a.Filename) {
		return errors.New("filename must be UTF-8")
	}
	for _, r := range a.Filename {
		if r < 0x20 || r == 0x7f {
			return errors.New("filename must not contain control characters")
		}
	}
	if err := CheckContentID(a.ContentID); err != nil {
		return err
	}
	if mt == "message/rfc822" {
		if bytes.IndexByte(a.Data, 0) >= 0 {
			return errors.New("an attached message must not contain NUL bytes")
		}
		for _, line := range bytes.Split(a.Data, []byte("\n")) {
			if len(line) > 999 { // 998 and the CR
				return errors.New("an attached message has a line longer than 998 bytes")
			}
		}
	}
	return nil
}

// CheckContentID reports whether id may be a Content-ID: "" (none), or at
// most MaxContentIDLen visible ASCII characters without angle brackets.
func CheckContentID(id string) error {
	if len(id) > MaxContentIDLen {
		return fmt.Errorf("content_id is longer than %d characters", MaxContentIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= 0x20 || c > 0x7e || c == '<' || c == '>' {
			return errors.New("content_id must be visible ASCII without spaces or angle brackets")
		}
	}
	return nil
}

// partBoundary derives a boundary from the Message-ID that occurs in no
// part that is not encoded ("=_" cannot come out of quoted-printable or
// base64; the counter steps past a forwarded message that happens to
// contain it).
func partBoundary(kind, messageID string, atts []Attachment) string {
	for n := 0; ; n++ {
		sum := sha256.Sum256([]byte(messageID + "\x00" + partKind(kind) + "\x00" + strconv.Itoa(n)))
		bd := "=_" + kind + hex.EncodeToString(sum[:16])
		clash := false
		for _, a := range atts {
			clash = clash || bytes.Contains(a.Data, []byte(bd))
		}
		if !clash {
			return bd
		}
	}
}

// partKind keeps the mixed boundary the one earlier versions derived.
func partKind(kind string) string {
	if kind == "m" {
		return "mixed"
	}
	return "related"
}

func isASCIIBytes(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// AttachmentDisposition is the Content-Disposition of a download of an
// attachment named filename: "attachment" with the name (RFC 6266, RFC
// 2231's encoding for a name that is not ASCII), or bare "attachment"
// when there is no name or it cannot be said. The download is always an
// attachment, never inline: a received file's name and type are a
// stranger's choice.
func AttachmentDisposition(filename string) string {
	if filename == "" {
		return "attachment"
	}
	if d := mime.FormatMediaType("attachment", map[string]string{"filename": filename}); d != "" {
		return d
	}
	return "attachment"
}
