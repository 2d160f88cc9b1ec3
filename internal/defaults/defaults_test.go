package defaults

import (
	"testing"
	"time"
)

// TestSet: only an unset value (zero, negative, empty) takes the default;
// a value the caller chose is kept.
func TestSet(t *testing.T) {
	cases := []struct {
		name     string
		got, def time.Duration
		want     time.Duration
	}{
		{"zero", 0, time.Second, time.Second},
		{"negative", -time.Minute, time.Second, time.Second},
		{"chosen", time.Millisecond, time.Second, time.Millisecond},
	}
	for _, c := range cases {
		Set(&c.got, c.def)
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	s := ""
	Set(&s, "mx")
	if s != "mx" {
		t.Errorf("empty string: got %q, want the default", s)
	}
	s = "smtp"
	Set(&s, "mx")
	if s != "smtp" {
		t.Errorf("chosen string: got %q, want it kept", s)
	}
	if got := Or(0, 7); got != 7 {
		t.Errorf("Or(0, 7) = %d", got)
	}
	if got := Or(3, 7); got != 3 {
		t.Errorf("Or(3, 7) = %d", got)
	}
}
