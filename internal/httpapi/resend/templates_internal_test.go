package resend

import "testing"

// TestResendPlaceholders_RoundTrip: Resend's {{{KEY}}} is stored as the Go
// template field {{.KEY}} and shown back as Resend wrote it.
func TestResendPlaceholders_RoundTrip(t *testing.T) {
	for _, c := range []struct{ resend, stored, shown string }{
		{"Hi {{{NAME}}}", "Hi {{.NAME}}", "Hi {{{NAME}}}"},
		{"{{{ first_name }}} and {{{PLAN2}}}", "{{.first_name}} and {{.PLAN2}}", "{{{first_name}}} and {{{PLAN2}}}"},
		{"no placeholders", "no placeholders", "no placeholders"},
		{"{{{9x}}}", "{{{9x}}}", "{{{9x}}}"}, // not a key: left for the template parser to refuse
	} {
		if got := toGoTemplate(c.resend); got != c.stored {
			t.Errorf("toGoTemplate(%q) = %q, want %q", c.resend, got, c.stored)
		}
		if got := fromGoTemplate(c.stored); got != c.shown {
			t.Errorf("fromGoTemplate(%q) = %q, want %q", c.stored, got, c.shown)
		}
	}
}
