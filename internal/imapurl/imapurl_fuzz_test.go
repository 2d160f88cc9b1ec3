package imapurl

import (
	"strings"
	"testing"
)

// FuzzParse reads arbitrary imap URLs, as tenants give them: each is a
// Config or an error, never a panic; an error never repeats the URL (it
// may hold a password), and what may be shown back (Redacted) does not
// depend on the password.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"imaps://user:secret@imap.example.com", "imap://u:p@127.0.0.1:1143?tls=none&inbox=Work&sent=Sent%20Items",
		"imap://[::1]:143", "imaps://a%40b:p%3Aw@h:993/", "imap://u:p@h?tls=maybe", "http://u:p@h", "imap://", "::",
		"imap://u:p@h:99999", "imaps://u:p@h?inbox=" + strings.Repeat("x", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := Parse(raw)
		if err != nil {
			if len(raw) >= 12 && strings.Contains(err.Error(), raw) {
				t.Fatalf("the error %q repeats the URL", err)
			}
			return
		}
		other := c
		other.Password = c.Password + "-other"
		if c.Redacted() != other.Redacted() {
			t.Fatalf("Redacted of %q shows the password: %q", raw, c.Redacted())
		}
	})
}
