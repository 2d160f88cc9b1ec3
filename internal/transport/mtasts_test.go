package transport

import "testing"

func TestSTSPolicy(t *testing.T) {
	p, err := parseSTSPolicy("example.com", "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\nmax_age: 604800\r\n")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"mail.example.com": true, "MAIL.example.com.": true, "mx1.example.net": true,
		"a.b.example.net": false, "example.net": false, "other.example.com": false,
	} {
		if got := p.matches(host); got != want {
			t.Errorf("matches(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{
		"version: STSv2\nmode: enforce\nmx: a\nmax_age: 1\n",
		"version: STSv1\nmode: strict\nmx: a\nmax_age: 1\n",
		"version: STSv1\nmode: enforce\nmax_age: 1\n",
		"version: STSv1\nmode: enforce\nmx: a\n",
	} {
		if _, err := parseSTSPolicy("example.com", bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// FuzzParseSTSPolicy reads arbitrary policy files, as a recipient domain's
// web server serves them: each is a policy or an error, never a panic,
// and a policy read is one delivery can act on: a known mode, an mx for
// enforce and testing, a max_age within the cap.
func FuzzParseSTSPolicy(f *testing.F) {
	for _, s := range []string{
		"version: STSv1\nmode: enforce\nmx: mx1.example.com\nmx: *.example.net\nmax_age: 604800\n",
		"version: STSv1\r\nmode: testing\r\nmx: a\r\nmax_age: 86400\r\n", "version: STSv1\nmode: none\nmax_age: 0\n",
		"version: STSv1\nmode: enforce\nmax_age: 1\n", "version: STSv2\nmode: enforce\nmx: a\nmax_age: 1\n",
		"mode: enforce\nmx: a\nmax_age: 99999999999999999999\n", "", ":\n::\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := parseSTSPolicy("example.com", text)
		if err != nil {
			return
		}
		switch {
		case p.Mode != STSEnforce && p.Mode != STSTesting && p.Mode != STSNone:
			t.Fatalf("mode %q read", p.Mode)
		case p.Mode != STSNone && len(p.MX) == 0:
			t.Fatalf("mode %s read without an mx", p.Mode)
		case p.MaxAge < 0 || p.MaxAge > stsMaxMaxAge:
			t.Fatalf("max_age %v read", p.MaxAge)
		}
	})
}
