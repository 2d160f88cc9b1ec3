package dnscheck

import (
	"fmt"
	"strings"
)

// textWidth is the line width Text wraps to.
const textWidth = 78

// Text renders the report for a terminal: the findings grouped by check,
// each with its level, message and fix, wrapped to 78 columns, then a
// one-line summary.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "DNS check of %s", r.Domain)
	if r.Selector != "" {
		fmt.Fprintf(&b, " (DKIM selector %s)", r.Selector)
	}
	fmt.Fprintf(&b, " via resolver %s\n", r.Resolver)
	for _, check := range []string{CheckMX, CheckSPF, CheckDKIM, CheckDMARC, CheckEgress, CheckBulk} {
		first := true
		for _, f := range r.Findings {
			if f.Check != check {
				continue
			}
			if first {
				fmt.Fprintf(&b, "\n%s\n", heading(check))
				first = false
			}
			label := fmt.Sprintf("  %-9s", f.Level)
			msg := f.Message
			if f.Rule != "" {
				msg = "[" + f.Rule + "] " + msg
			}
			writeWrapped(&b, label, msg)
			if f.Fix != "" {
				writeWrapped(&b, strings.Repeat(" ", len(label)), "Fix: "+f.Fix)
			}
		}
	}
	errs, warns := r.Count(Error), r.Count(Warning)
	fmt.Fprintf(&b, "\nResult: %s (%s, %s)\n", strings.ToUpper(string(r.Level())),
		plural(errs, "error", "errors"), plural(warns, "warning", "warnings"))
	return b.String()
}

// heading is a section's title.
func heading(check string) string {
	if check == CheckBulk {
		return "BULK SENDER RULES (Gmail, Yahoo, Microsoft)"
	}
	return strings.ToUpper(check)
}

// writeWrapped writes text after prefix, wrapping at word boundaries with
// continuation lines indented as far as the prefix. A word longer than a
// line gets a line of its own.
func writeWrapped(b *strings.Builder, prefix, text string) {
	indent := strings.Repeat(" ", len(prefix))
	b.WriteString(prefix)
	col := len(prefix)
	start := true
	for _, w := range strings.Fields(text) {
		if !start && col+1+len(w) > textWidth {
			b.WriteString("\n")
			b.WriteString(indent)
			col = len(indent)
			start = true
		}
		if !start {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
		start = false
	}
	b.WriteByte('\n')
}
