package message

import (
	"bytes"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// benchMessage is fullMessage with 2 KiB of text and 2 KiB of HTML.
func benchMessage() *Message {
	m := fullMessage()
	para := "Hello Jane, here is a paragraph of ordinary text with the odd ümlaut. "
	m.Text = strings.Repeat(para+"\n", 2048/len(para)+1)[:2048]
	m.HTML = strings.Repeat("<p>"+para+"</p>\n", 2048/(len(para)+8)+1)[:2048]
	return m
}

// BenchmarkBuild's yardstick is BenchmarkBuild_Yardstick.
func BenchmarkBuild(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Text) + len(m.HTML)))
	for b.Loop() {
		if _, err := Build(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild_Yardstick renders the same message with the standard
// library as a naive sender would: net/mail's addresses, mime's encoded
// words, mime/multipart and quoted-printable into a bytes.Buffer, with no
// checks, no folding and no line-ending normalisation. The ratio is what
// Build's care (refusing injected headers, folding to 78 columns, CRLF
// bodies, encoded words that read back) costs beyond writing the bytes.
func BenchmarkBuild_Yardstick(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Text) + len(m.HTML)))
	addrs := func(l []mail.Address) string {
		s := make([]string, len(l))
		for i := range l {
			s[i] = l[i].String()
		}
		return strings.Join(s, ", ")
	}
	for b.Loop() {
		var buf bytes.Buffer
		field := func(name, value string) { buf.WriteString(name + ": " + value + "\r\n") }
		field("From", m.From.String())
		field("To", addrs(m.To))
		field("Cc", addrs(m.Cc))
		field("Reply-To", addrs(m.ReplyTo))
		field("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
		field("Date", m.Date.Format(time.RFC1123Z))
		field("Message-ID", m.MessageID)
		field("In-Reply-To", m.InReplyTo)
		field("References", strings.Join(m.References, " "))
		for _, h := range m.Headers {
			field(h.Name, mime.QEncoding.Encode("utf-8", h.Value))
		}
		field("MIME-Version", "1.0")
		mw := multipart.NewWriter(&buf)
		field("Content-Type", "multipart/alternative; boundary="+mw.Boundary())
		buf.WriteString("\r\n")
		for _, p := range []struct{ ctype, body string }{{"text/plain; charset=utf-8", m.Text}, {"text/html; charset=utf-8", m.HTML}} {
			pw, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {p.ctype}, "Content-Transfer-Encoding": {"quoted-printable"}})
			if err != nil {
				b.Fatal(err)
			}
			qw := quotedprintable.NewWriter(pw)
			if _, err := qw.Write([]byte(p.body)); err != nil {
				b.Fatal(err)
			}
			if err := qw.Close(); err != nil {
				b.Fatal(err)
			}
		}
		if err := mw.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
