package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Attachment is one file attached to a message.
type Attachment struct {
	// ContentType is the MIME type, e.g. "message/rfc822" for a forwarded
	// message, which is embedded as is (7bit or 8bit); every other type is
	// base64-encoded.
	ContentType string
	// Filename is offered to the recipient (Content-Disposition); printable
	// ASCII without quotes or backslashes, or empty.
	Filename string
	Data     []byte
}

// BuildWithAttachments renders m like Build and attaches atts: the message
// becomes multipart/mixed whose first part is what Build would have made the
// body (a single part or multipart/alternative), followed by one part per
// attachment. Without attachments it is Build. Like Build it is
// deterministic: the boundary derives from the Message-ID and the content.
func BuildWithAttachments(m *Message, atts []Attachment) ([]byte, error) {
	raw, err := Build(m)
	if err != nil || len(atts) == 0 {
		return raw, err
	}
	for i, a := range atts {
		if err := checkAttachment(a); err != nil {
			return nil, fmt.Errorf("message: build %s: attachment %d: %w", m.MessageID, i, err)
		}
	}
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, fmt.Errorf("message: build %s: no header/body separator", m.MessageID)
	}
	head, body := raw[:end+2], raw[end+4:]
	var kept, content []string // header fields, each with its folded lines and CRLFs
	for _, f := range splitFields(string(head)) {
		name, _, _ := strings.Cut(f, ":")
		if strings.EqualFold(name, "Content-Type") || strings.EqualFold(name, "Content-Transfer-Encoding") {
			content = append(content, f)
			continue
		}
		kept = append(kept, f)
	}
	boundary := mixedBoundary(m.MessageID, body, atts)

	var b bytes.Buffer
	for _, f := range kept {
		if strings.HasPrefix(strings.ToLower(f), "mime-version:") {
			b.WriteString(f)
			b.WriteString(`Content-Type: multipart/mixed; boundary="` + boundary + "\"\r\n")
			continue
		}
		b.WriteString(f)
	}
	b.WriteString("\r\n")
	b.WriteString("--" + boundary + "\r\n")
	for _, f := range content {
		b.WriteString(f)
	}
	b.WriteString("\r\n")
	b.Write(body)
	// The CRLF before each delimiter belongs to the delimiter (RFC 2046
	// §5.1.1), so every part decodes to exactly its content.
	b.WriteString("\r\n")
	for _, a := range atts {
		b.WriteString("--" + boundary + "\r\n")
		b.WriteString("Content-Type: " + a.ContentType + "\r\n")
		disp := "attachment"
		if a.Filename != "" {
			disp += `; filename="` + a.Filename + `"`
		}
		b.WriteString("Content-Disposition: " + disp + "\r\n")
		if strings.EqualFold(a.ContentType, "message/rfc822") {
			cte := "7bit"
			if !isASCIIBytes(a.Data) {
				cte = "8bit"
			}
			b.WriteString("Content-Transfer-Encoding: " + cte + "\r\n\r\n")
			b.Write(a.Data)
			b.WriteString("\r\n")
			continue
		}
		b.WriteString("Content-Transfer-Encoding: base64\r\n\r\n")
		enc := base64.StdEncoding.EncodeToString(a.Data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.Bytes(), nil
}

func checkAttachment(a Attachment) error {
	typ, sub, ok := strings.Cut(a.ContentType, "/")
	if !ok || typ == "" || sub == "" || strings.ContainsAny(a.ContentType, " \t\r\n;\"") || !plainASCII(a.ContentType) {
		return fmt.Errorf("invalid content type %q", a.ContentType)
	}
	for i := 0; i < len(a.Filename); i++ {
		if c := a.Filename[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return errors.New("filename must be printable ASCII without quotes or backslashes")
		}
	}
	if strings.EqualFold(a.ContentType, "message/rfc822") {
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

// splitFields splits a header block into fields, each with its
// continuation lines and line breaks.
func splitFields(head string) []string {
	var out []string
	for head != "" {
		i := strings.Index(head, "\r\n")
		if i < 0 {
			i = len(head) - 2
		}
		line := head[:i+2]
		head = head[i+2:]
		if len(out) > 0 && (line[0] == ' ' || line[0] == '\t') {
			out[len(out)-1] += line
			continue
		}
		out = append(out, line)
	}
	return out
}

// mixedBoundary derives a boundary from the Message-ID that occurs in
// neither the body nor an attachment ("=_m" cannot come out of
// quoted-printable, and the counter steps past a forwarded message that
// happens to contain it).
func mixedBoundary(messageID string, body []byte, atts []Attachment) string {
	for n := 0; ; n++ {
		sum := sha256.Sum256([]byte(messageID + "\x00mixed\x00" + strconv.Itoa(n)))
		bd := "=_m" + hex.EncodeToString(sum[:16])
		clash := bytes.Contains(body, []byte(bd))
		for _, a := range atts {
			clash = clash || bytes.Contains(a.Data, []byte(bd))
		}
		if !clash {
			return bd
		}
	}
}

func isASCIIBytes(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
