package app

import "testing"

// TestNextSelector: the trailing number one up, a bare name counting as
// 1, taken ones skipped, a number too long to count on kept whole.
func TestNextSelector(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		current string
		taken   []string
		want    string
	}{
		{"s1", nil, "s2"},
		{"s1", []string{"s2", "s3"}, "s4"},
		{"mail-2025", nil, "mail-2026"},
		{"default", nil, "default2"},
		{"2024", nil, "2025"},
		{"k.s9", nil, "k.s10"},
		{"s12345678901", nil, "s12345678901-2"},
	} {
		taken := map[string]bool{c.current: true}
		for _, s := range c.taken {
			taken[s] = true
		}
		if got := nextSelector(c.current, taken); got != c.want {
			t.Errorf("nextSelector(%q, %v) = %q, want %q", c.current, c.taken, got, c.want)
		}
	}
}
