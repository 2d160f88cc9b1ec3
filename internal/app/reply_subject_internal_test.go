package app

import "testing"

// TestReplySubject_FoldsControls: a subject stored with the CR LF an
// encoded word decoded to (messages received before Parse folded them)
// still makes a one-line reply and forward subject.
func TestReplySubject_FoldsControls(t *testing.T) {
	if got := ReplySubject("Order\r\nBcc: evil@x.test"); got != "Re: Order Bcc: evil@x.test" {
		t.Fatalf("ReplySubject: %q", got)
	}
	if got := ForwardSubject("Order\x00\nnext"); got != "Fwd: Order next" {
		t.Fatalf("ForwardSubject: %q", got)
	}
	if got := ReplySubject("Re: tab\tkept"); got != "Re: tab\tkept" {
		t.Fatalf("ReplySubject of a clean subject: %q", got)
	}
}
