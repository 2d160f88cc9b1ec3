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
