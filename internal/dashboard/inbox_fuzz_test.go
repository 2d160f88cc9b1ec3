package dashboard

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/core"
)

// FuzzParsed feeds the dev inbox's message reader arbitrary bytes: a
// captured message is whatever a send rendered, but the viewer must never
// panic or hang on one, and what it shows is bounded.
func FuzzParsed(f *testing.F) {
	f.Add([]byte("Subject: hi\r\nContent-Type: text/plain\r\n\r\nhello"))
	f.Add([]byte("Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nt\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>h</p>\r\n--b--\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=\r\n\r\n--\r\n"))
	f.Add([]byte("Content-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=E9t=E9"))
	f.Add([]byte("\x00\xff\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := parsed(&core.InboxMessage{Raw: raw})
		if len(d.HTML) > maxPart || len(d.Text) > maxPart || len(d.Head) > len(raw) {
			t.Fatalf("parsed shows more than it read: html %d, text %d, head %d of %d", len(d.HTML), len(d.Text), len(d.Head), len(raw))
		}
	})
}

func TestParsed_MultipartAndCharset(t *testing.T) {
	raw := "Subject: x\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain; charset=iso-8859-1\r\n" +
		"Content-Transfer-Encoding: quoted-printable\r\n\r\n=E9t=E9\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>h</p>\r\n--b--\r\n"
	d := parsed(&core.InboxMessage{Raw: []byte(raw)})
	if d.Text != "été" || strings.TrimSpace(d.HTML) != "<p>h</p>" || !utf8.ValidString(d.Text) {
		t.Errorf("parsed text %q html %q, want été and <p>h</p>", d.Text, d.HTML)
	}
	if !strings.HasPrefix(d.Head, "Subject: x") {
		t.Errorf("head %q", d.Head)
	}
}
