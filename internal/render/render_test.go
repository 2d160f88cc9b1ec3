package render

import (
	"bytes"
	"net/mail"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// A send renders to headers that name To and Cc but never Bcc, with the
// send's own Message-ID, and to an envelope of every recipient; the same
// send renders the same bytes every time (each attempt sends them).
func TestMessage_HeadersEnvelopeAndStableBytes(t *testing.T) {
	s := &core.Send{ID: "snd_1", From: "Ann <ann@example.com>", To: []string{"Bob <bob@example.com>"},
		Cc: []string{"cy@example.com"}, Bcc: []string{"dee@example.com"}, Subject: "Hi", Text: "hello",
		MessageID: "<snd_1@example.com>", CreatedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	raw, env, err := Message(s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("Message-Id"); got != s.MessageID {
		t.Errorf("Message-ID %q, want %q", got, s.MessageID)
	}
	if m.Header.Get("Bcc") != "" || bytes.Contains(raw, []byte("dee@example.com")) {
		t.Errorf("the Bcc recipient shows in the message:\n%s", raw)
	}
	if m.Header.Get("To") == "" || m.Header.Get("Cc") == "" {
		t.Errorf("To or Cc missing:\n%s", raw)
	}
	if env.From != "ann@example.com" || !slices.Equal(env.To, []string{"bob@example.com", "cy@example.com", "dee@example.com"}) {
		t.Errorf("envelope %+v", env)
	}
	again, _, err := Message(s)
	if err != nil || !bytes.Equal(raw, again) {
		t.Errorf("a second render differs (err %v)", err)
	}
}

// A submitted message goes out as the client wrote it, with a Message-ID
// added when it had none; its envelope is the send's From and recipients.
func TestMessage_SubmittedMessageKeptAsWritten(t *testing.T) {
	client := []byte("From: ann@example.com\r\nTo: bob@example.com\r\nSubject: x\r\nX-Mine: 1\r\n\r\nbody\r\n")
	s := &core.Send{ID: "snd_2", From: "ann@example.com", To: []string{"bob@example.com"}, Bcc: []string{"eve@example.com"},
		Raw: client, MessageID: "<snd_2@example.com>", CreatedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	raw, env, err := Message(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("X-Mine: 1\r\n")) || !bytes.HasSuffix(raw, []byte("\r\n\r\nbody\r\n")) {
		t.Errorf("the client's message was changed:\n%s", raw)
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil || m.Header.Get("Message-Id") != s.MessageID {
		t.Errorf("Message-ID not added (err %v):\n%s", err, raw)
	}
	if !slices.Equal(env.To, []string{"bob@example.com", "eve@example.com"}) {
		t.Errorf("envelope %+v", env)
	}
}

func TestMessage_BadAddressIsAnError(t *testing.T) {
	if _, _, err := Message(&core.Send{From: "not an address", To: []string{"bob@example.com"}}); err == nil {
		t.Fatal("a send with an unparsable From rendered")
	}
}
