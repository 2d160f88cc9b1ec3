package cli

import (
	"testing"
)

// --public-url (and SENDONCE_PUBLIC_URL) reaches the server as given; a
// value that is not an http or https URL is refused at start.
func TestServeFlags_PublicURL(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		ok   bool
	}{
		{nil, "", true},
		{[]string{"--public-url", "https://mail.example.com"}, "", true},
		{nil, "https://env.example.com", true},
		{[]string{"--public-url", "mail.example.com"}, "", false},
		{[]string{"--public-url", "ftp://mail.example.com"}, "", false},
	} {
		cfg := serveFlagsFrom(t, map[string]string{"SENDONCE_PUBLIC_URL": c.env}, c.args...)
		err := cfg.validate()
		if (err == nil) != c.ok {
			t.Errorf("%v %q: validate() = %v, want ok %v", c.args, c.env, err, c.ok)
		}
		want := c.env
		if len(c.args) == 2 {
			want = c.args[1]
		}
		if c.ok && cfg.Server.PublicURL != want {
			t.Errorf("%v %q: PublicURL %q, want %q", c.args, c.env, cfg.Server.PublicURL, want)
		}
	}
}
