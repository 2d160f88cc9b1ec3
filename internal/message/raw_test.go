package message

import (
	"bytes"
	"testing"
	"time"
)

var rawSeed = []byte("From: A <a@example.com>\r\nTo: b@example.com\r\nSubject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n" +
	"X-Folded: one\r\n\ttwo\r\nIdempotency-Key: k1\r\n\r\nbody \xc3\xbc\r\n.\r\n")

// TestWriteRaw_KeepsUntouchedFieldsByteForByte: reading and writing back
// changes nothing; removing a field removes only its line.
func TestWriteRaw_KeepsUntouchedFieldsByteForByte(t *testing.T) {
	h, body, err := ReadRaw(rawSeed)
	if err != nil {
		t.Fatal(err)
	}
	if got := WriteRaw(h, body); !bytes.Equal(got, rawSeed) {
		t.Fatalf("round trip changed the message:\n got %q\nwant %q", got, rawSeed)
	}
	h.Del("Idempotency-Key")
	want := bytes.Replace(rawSeed, []byte("Idempotency-Key: k1\r\n"), nil, 1)
	if got := WriteRaw(h, body); !bytes.Equal(got, want) {
		t.Fatalf("removing a field:\n got %q\nwant %q", got, want)
	}
}

// TestCompleteRaw_AddsOnlyWhatIsMissing: Message-ID and Date are added when
// absent, in front; a message that has both is returned as it is; a bad
// msg-id is refused.
func TestCompleteRaw_AddsOnlyWhatIsMissing(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	got, err := CompleteRaw(rawSeed, "<snd_1@example.com>", at)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte("Message-ID: <snd_1@example.com>\r\nDate: Tue, 01 Dec 2026 12:00:00 +0000\r\n"), rawSeed...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	again, err := CompleteRaw(got, "<other@example.com>", at)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("a complete message changed: %q, %v", again, err)
	}
	if _, err := CompleteRaw(rawSeed, "<bad id\r\nBcc: x@y>", at); err == nil {
		t.Fatal("a msg-id with CR LF was written")
	}
}

// FuzzReadRaw: any input either fails to parse or reads back the same
// fields after a write, and never panics.
func FuzzReadRaw(f *testing.F) {
	f.Add(rawSeed)
	f.Add([]byte("Subject: x\n\nbare LF\n"))
	f.Add([]byte("no header at all"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, body, err := ReadRaw(raw)
		if err != nil {
			return
		}
		h2, body2, err := ReadRaw(WriteRaw(h, body))
		if err != nil {
			t.Fatalf("written message does not read back: %v", err)
		}
		if !bytes.Equal(body, body2) || h.Len() != h2.Len() {
			t.Fatalf("fields or body changed: %d/%d fields", h.Len(), h2.Len())
		}
	})
}
