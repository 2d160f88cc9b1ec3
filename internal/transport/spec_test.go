package transport

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		in       string
		kind     Kind
		redacted string
	}{
		{"capture", Capture, "capture"},
		{"mx", Direct, "mx"},
		{"smtp://relay.test:2525?tls=none", Relay, "smtp://relay.test:2525?tls=none"},
		{"smtp://ann:s3cret@relay.test", Relay, "smtp://ann:xxxxx@relay.test:25"},
		{"smtps://relay.test", Relay, "smtp://relay.test:465?tls=tls"},
		{"ses://eu-west-1", SESKind, "ses://eu-west-1"},
		{"ses://AKID:s3cret@eu-west-1?configuration_set=cs", SESKind, "ses://AKID:xxxxx@eu-west-1?configuration_set=cs"},
		{"resend://re_s3cret@", ResendKind, "resend://xxxxx@"},
		{"resend://re_s3cret@127.0.0.1:9?tls=none", ResendKind, "resend://xxxxx@127.0.0.1:9?tls=none"},
	} {
		s, err := ParseSpec(c.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.in, err)
			continue
		}
		if s.Kind != c.kind || s.String() != c.in || s.Redacted() != c.redacted {
			t.Errorf("ParseSpec(%q) = kind %q, string %q, redacted %q; want %q, %q, %q",
				c.in, s.Kind, s.String(), s.Redacted(), c.kind, c.in, c.redacted)
		}
		if got, want := IsRelay(c.in), c.kind == Relay; got != want {
			t.Errorf("IsRelay(%q) = %v; want %v", c.in, got, want)
		}
		if got, want := IsProvider(c.in), c.kind == SESKind || c.kind == ResendKind; got != want {
			t.Errorf("IsProvider(%q) = %v; want %v", c.in, got, want)
		}
	}
	if s, _ := ParseSpec("smtp://ann:s3cret@relay.test"); s.SMTP.Password != "s3cret" || s.SMTP.Host != "relay.test" {
		t.Errorf("relay config = %+v; want host relay.test, password s3cret", s.SMTP)
	}
	if _, err := ParseSpec("resend://"); err == nil {
		t.Error("resend:// without a key parsed")
	}
}

func TestParseSpec_Rejects(t *testing.T) {
	for _, in := range []string{"", "Capture", "MX", "smtp", "http://relay.test", "smtp://ann:pa ss@relay.test", "smtp://relay.test?tls=maybe"} {
		s, err := ParseSpec(in)
		if err == nil {
			t.Errorf("ParseSpec(%q) = %+v; want an error", in, s)
			continue
		}
		if !strings.HasPrefix(err.Error(), "transport: ") || strings.Contains(err.Error(), "pa ss") {
			t.Errorf("ParseSpec(%q) error %q: want a transport: error without the password", in, err)
		}
	}
	if IsRelay("") || IsRelay("capture") || IsRelay("mx") {
		t.Error("IsRelay: capture, mx and empty are not relays")
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"capture", "mx", "smtp://u:p@h:25?tls=none", "smtps://h", "smtp://%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSpec(in)
		if err != nil {
			return
		}
		if s.String() != in {
			t.Fatalf("String() = %q; want %q", s.String(), in)
		}
		if s.Kind == Relay && s.SMTP.Password != "" && s.SMTP.Password != "xxxxx" && strings.Contains(s.Redacted(), ":"+url.UserPassword("u", s.SMTP.Password).String()[2:]+"@") {
			t.Fatalf("Redacted() %q shows the password", s.Redacted())
		}
	})
}
