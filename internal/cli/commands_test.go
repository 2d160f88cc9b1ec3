package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestHelp_FromTable: help lists every row of the command table, each
// description at the help column, and names and aliases are unique.
func TestHelp_FromTable(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	seen := map[string]bool{}
	for _, c := range commands {
		for _, n := range append([]string{c.name}, c.aliases...) {
			if seen[n] {
				t.Errorf("command name %q twice in the table", n)
			}
			seen[n] = true
		}
		if len(c.usage) == 0 || c.run == nil {
			t.Errorf("command %q: want usage lines and a run function", c.name)
		}
		for _, u := range c.usage {
			first := strings.Split(u.synopsis, "\n")[0]
			if !strings.Contains(help, "\n  sendonce "+first) {
				t.Errorf("help lacks %q", first)
			}
			if u.help != "" && !strings.Contains(help, "\n"+strings.Repeat(" ", helpColumn)+u.help+"\n") &&
				!strings.Contains(help, first+strings.Repeat(" ", helpColumn-len(synopsisIndent)-len(first))+u.help+"\n") {
				t.Errorf("help of %q is not at column %d", first, helpColumn)
			}
		}
	}
}

func TestRun_UnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"frobnicate"}, func(string) string { return "" }, &stdout, &stderr)
	if !errors.Is(err, ErrUsage) || !strings.Contains(stderr.String(), "Usage:") || stdout.Len() != 0 {
		t.Errorf("err %v, stderr %q, stdout %q; want a usage error with the help on stderr", err, stderr.String(), stdout.String())
	}
	stdout.Reset()
	if err := Run(context.Background(), []string{"--version"}, func(string) string { return "" }, &stdout, &stderr); err != nil || !strings.HasPrefix(stdout.String(), "sendonce ") {
		t.Errorf("--version: %v, %q", err, stdout.String())
	}
}
