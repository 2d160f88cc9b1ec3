package inmail

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/emersion/go-message"
)

func TestParse_FieldsPartsAndAttachments(t *testing.T) {
	raw := "From: =?utf-8?q?Ad=C3=A9le?= <adele@a.test>\r\nTo: x@b.test, Y <y@b.test>\r\nCc: c@b.test\r\n" +
		"Subject: =?utf-8?q?Caf=C3=A9?=\r\nMessage-ID: <1@a.test>\r\nIn-Reply-To: <0@b.test>\r\n" +
		"References: <a@b.test> <0@b.test>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=O\r\n\r\n--O\r\nContent-Type: multipart/alternative; boundary=I\r\n\r\n" +
		"--I\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ncaf=E9\r\n" +
		"--I\r\nContent-Type: text/html\r\n\r\n<p>cafe</p>\r\n--I--\r\n" +
		"--O\r\nContent-Type: image/png\r\nContent-ID: <img1>\r\nContent-Disposition: inline; filename=a.png\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--O--\r\n"
	p, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "Café" || !strings.Contains(p.From, "adele@a.test") || len(p.To) != 2 || len(p.Cc) != 1 {
		t.Fatalf("header view: %+v", p)
	}
	if p.MessageID != "<1@a.test>" || p.InReplyTo != "<0@b.test>" || len(p.References) != 2 {
		t.Fatalf("ids: %q %q %v", p.MessageID, p.InReplyTo, p.References)
	}
	if p.To[0] != "x@b.test" || p.To[1] != `"Y" <y@b.test>` || p.Cc[0] != "c@b.test" {
		t.Fatalf("addresses: %q %q, want bare addresses bare and named ones with their name", p.To, p.Cc)
	}
	if p.Text != "café" || !strings.Contains(p.HTML, "<p>cafe</p>") {
		t.Fatalf("bodies: %q %q", p.Text, p.HTML)
	}
	if len(p.Attachments) != 1 || p.Attachments[0].ContentID != "img1" || p.Attachments[0].Size != 5 {
		t.Fatalf("attachments: %+v", p.Attachments)
	}
	b, err := Part([]byte(raw), p.Attachments[0].Part)
	if err != nil || string(b) != "hello" {
		t.Fatalf("part: %q %v", b, err)
	}
}

// TestParse_NestingIsBounded: a message nested past MaxDepth is refused
// without recursing through all of it.
func TestParse_NestingIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("Subject: deep\r\nMIME-Version: 1.0\r\n")
	for i := 0; i < 200; i++ {
		b.WriteString("Content-Type: multipart/mixed; boundary=b" + itoa(i) + "\r\n\r\n--b" + itoa(i) + "\r\n")
	}
	b.WriteString("Content-Type: text/plain\r\n\r\nx\r\n")
	if _, err := Parse([]byte(b.String())); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("200 levels: %v, want ErrTooComplex", err)
	}
}

func TestParse_PartsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("Subject: many\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n")
	for i := 0; i < MaxParts+10; i++ {
		b.WriteString("--B\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n")
	}
	b.WriteString("--B--\r\n")
	if _, err := Parse([]byte(b.String())); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("%d parts: %v, want ErrTooComplex", MaxParts+10, err)
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

// FuzzParse: any bytes parse or fail, without a panic, and an
// attachment the parse lists can be read back.
func FuzzParse(f *testing.F) {
	f.Add([]byte("Subject: x\r\n\r\nbody"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: a/b\r\n\r\nx\r\n--B--\r\n"))
	f.Add([]byte("From: <>\r\nReferences: <<<>>\r\nDate: nonsense\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := Parse(raw)
		if err != nil {
			return
		}
		for _, a := range p.Attachments {
			if _, err := Part(raw, a.Part); err != nil {
				t.Fatalf("listed attachment %d unreadable: %v", a.Part, err)
			}
		}
	})
}

// BenchmarkParse is the parse cost of a received message: a 1 MB message
// with a text part, an HTML part and a base64 attachment (b.SetBytes:
// MB/s is the parse rate).
func BenchmarkParse(b *testing.B) {
	raw := benchMessage()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse_LibraryWalk is the yardstick: go-message alone walking
// the same message and reading every part's decoded bytes into nothing.
func BenchmarkParse_LibraryWalk(b *testing.B) {
	raw := benchMessage()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		e, err := message.Read(bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Walk(func(_ []int, part *message.Entity, err error) error {
			if err == nil && part.MultipartReader() == nil {
				_, err = io.Copy(io.Discard, part.Body)
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchMessage() []byte {
	body := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit.\r\n", 4000)
	att := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldY\r\n", 20000)
	raw := []byte("From: a@b.test\r\nTo: c@d.test\r\nSubject: bench\r\nMessage-ID: <x@b.test>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=O\r\n\r\n--O\r\nContent-Type: multipart/alternative; boundary=I\r\n\r\n" +
		"--I\r\nContent-Type: text/plain\r\n\r\n" + body + "--I\r\nContent-Type: text/html\r\n\r\n<p>" + body + "</p>\r\n--I--\r\n" +
		"--O\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=a.bin\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n" + att + "--O--\r\n")
	return raw
}
