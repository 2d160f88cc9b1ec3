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
