package dovecottest

import (
	"slices"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
)

func msg(id string) []byte {
	return []byte("From: a@example.com\r\nTo: alice@example.com\r\nSubject: hi\r\nMessage-ID: " + id + "\r\n\r\nhello\r\n")
}

func TestDovecot_SeedsFindsAndResets(t *testing.T) {
	d := Start(t, Options{})
	d.Deliver(t, "alice", "INBOX", msg("<one@test>"), time.Now().Add(-time.Hour))
	d.Append(t, "alice", "INBOX", msg("<two@test>"), true)
	d.Append(t, "alice", "Sent", msg("<sent@test>"), true)
	if got := d.MessageIDs(t, "alice", "INBOX"); !slices.Equal(got, []string{"<one@test>", "<two@test>"}) {
		t.Fatalf("INBOX holds %q", got)
	}
	if got := d.MessageIDs(t, "alice", "Sent"); !slices.Equal(got, []string{"<sent@test>"}) {
		t.Fatalf("Sent holds %q", got)
	}

	c := d.Dial(t, "alice")
	boxes, err := c.List("", "*", &imap.ListOptions{ReturnSpecialUse: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var sent string
	for _, b := range boxes {
		if slices.Contains(b.Attrs, imap.MailboxAttrSent) {
			sent = b.Mailbox
		}
	}
	if sent != "Sent" {
		t.Fatalf("no \\Sent folder in %+v", boxes)
	}
	d.SetUIDValidity(t, "alice", "INBOX", 4242)
	st, err := c.Status("INBOX", &imap.StatusOptions{UIDValidity: true}).Wait()
	if err != nil || st.UIDValidity != 4242 {
		t.Fatalf("UIDVALIDITY %d, %v; want 4242", st.UIDValidity, err)
	}
}

func TestDovecot_PasswordChangeAndTLS(t *testing.T) {
	d := Start(t, Options{TLS: true, Host: "127.0.0.7"})
	d.Append(t, "alice", "INBOX", msg("<tls@test>"), false)
	d.SetPassword(t, "alice", "changed")
	c := d.Dial(t, "alice") // logs in with the new password or fails
	if err := c.Noop().Wait(); err != nil {
		t.Fatal(err)
	}
}
