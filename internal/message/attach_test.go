package message

import (
	"bytes"
	"io"
	"net/mail"
	"strings"
	"testing"
	"time"

	gomessage "github.com/emersion/go-message"
)

func forwardFixture() *Message {
	return &Message{
		From: mail.Address{Address: "a@example.com"}, To: []mail.Address{{Address: "b@example.com"}},
		Subject: "Fwd: Hello", Text: "See below.", HTML: "<p>See below.</p>",
		MessageID: "<fwd1@example.com>", Date: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestBuildWithAttachments_ForwardsAMessage(t *testing.T) {
	orig := []byte("From: c@example.com\r\nTo: a@example.com\r\nSubject: Hello\r\nMessage-ID: <o1@example.com>\r\n\r\nOriginal body.\r\n")
	raw, err := BuildWithAttachments(forwardFixture(), []Attachment{{ContentType: "message/rfc822", Filename: "forwarded.eml", Data: orig}})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := BuildWithAttachments(forwardFixture(), []Attachment{{ContentType: "message/rfc822", Filename: "forwarded.eml", Data: orig}})
	if !bytes.Equal(raw, again) {
		t.Fatal("not deterministic")
	}
	e, err := gomessage.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if mt, _, _ := e.Header.ContentType(); mt != "multipart/mixed" {
		t.Fatalf("Content-Type %q, want multipart/mixed", mt)
	}
	if got := e.Header.Get("Subject"); got != "Fwd: Hello" {
		t.Fatalf("Subject %q", got)
	}
	mr := e.MultipartReader()
	var types []string
	var attached []byte
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		mt, _, _ := p.Header.ContentType()
		types = append(types, mt)
		b, _ := io.ReadAll(p.Body)
		if mt == "message/rfc822" {
			attached = b
			if d := p.Header.Get("Content-Disposition"); !strings.Contains(d, `filename="forwarded.eml"`) {
				t.Fatalf("Content-Disposition %q", d)
			}
		}
	}
	if strings.Join(types, ",") != "multipart/alternative,message/rfc822" {
		t.Fatalf("parts %v", types)
	}
	if !bytes.Equal(attached, orig) {
		t.Fatalf("attached message changed:\n%q\nwant\n%q", attached, orig)
	}
}

func TestBuildWithAttachments_StepsPastABoundaryInTheContent(t *testing.T) {
	m := forwardFixture()
	first := partBoundary("m", m.MessageID, nil)
	orig := []byte("Subject: x\r\n\r\n--" + first + "\r\n")
	raw, err := BuildWithAttachments(m, []Attachment{{ContentType: "message/rfc822", Data: orig}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(`boundary="`+first+`"`)) {
		t.Fatal("boundary occurs in the attached message")
	}
}

func TestBuildWithAttachments_RefusesBadAttachments(t *testing.T) {
	for _, a := range []Attachment{
		{ContentType: "text", Data: []byte("x")},
		{ContentType: "text/plain\r\nX: y", Data: []byte("x")},
		{ContentType: "text/plain", Filename: "a\r\nb", Data: []byte("x")},
		{ContentType: "image/png", ContentID: "a b", Data: []byte("x")},
		{ContentType: "image/png", ContentID: "<a>", Data: []byte("x")},
		{ContentType: "multipart/mixed", Data: []byte("x")},
		{ContentType: "message/rfc822", Data: []byte("a\x00b")},
	} {
		if _, err := BuildWithAttachments(forwardFixture(), []Attachment{a}); err == nil {
			t.Errorf("%+v: no error", a)
		}
	}
}

// FuzzBuildWithAttachments: whatever a file's name, type, Content-ID and
// bytes, Build either refuses it or renders a message that go-message
// parses back into the same bytes, name and Content-ID, with the header
// section unchanged (no field injected).
func FuzzBuildWithAttachments(f *testing.F) {
	f.Add("a.pdf", "application/pdf", "", []byte("%PDF"), "")
	f.Add("résumé ü.pdf", "application/pdf", "", []byte{0, 1, 2, 0xff}, "<p>x</p>")
	f.Add("logo.png", "image/png", "logo@x", []byte("\x89PNG"), `<img src="cid:logo@x">`)
	f.Add("a\r\nBcc: v@example.com", "text/plain", "", []byte("x"), "")
	f.Add("a.txt", "text/plain; charset=utf-8", "x>\r\nBcc: v", []byte("x"), "<p>h</p>")
	f.Add("fwd.eml", "message/rfc822", "", []byte("Subject: x\r\n\r\n--=_m\r\n"), "")
	f.Add(strings.Repeat("n", 900), "application/octet-stream", "", []byte{}, "")
	f.Fuzz(func(t *testing.T, filename, ctype, cid string, data []byte, html string) {
		m := forwardFixture()
		m.HTML = html
		if m.HTML == "" {
			m.HTML = "<p>x</p>"
		}
		a := Attachment{Filename: filename, ContentType: ctype, ContentID: cid, Data: data}
		raw, err := BuildWithAttachments(m, []Attachment{a})
		if err != nil {
			return
		}
		e, err := gomessage.Read(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("does not parse: %v\n%q", err, raw)
		}
		for _, h := range []string{"Bcc", "X-Injected"} {
			if e.Header.Has(h) {
				t.Fatalf("header %s appeared", h)
			}
		}
		found := false
		var walk func(e *gomessage.Entity)
		walk = func(e *gomessage.Entity) {
			if mr := e.MultipartReader(); mr != nil {
				for {
					p, err := mr.NextPart()
					if err != nil {
						return
					}
					walk(p)
				}
			}
			_, params, _ := e.Header.ContentDisposition()
			if params["filename"] != filename || strings.Trim(e.Header.Get("Content-Id"), "<>") != cid {
				return
			}
			b, err := io.ReadAll(e.Body)
			if err == nil && bytes.Equal(b, data) {
				found = true
			}
		}
		walk(e)
		if !found && filename != "" {
			t.Fatalf("no part carries the file %q (cid %q, %d bytes) back:\n%q", filename, cid, len(data), raw)
		}
	})
}
