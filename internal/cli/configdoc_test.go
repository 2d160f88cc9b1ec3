package cli

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

// TestConfigurationDoc_ServeDefaults: docs/configuration.md's table of serve flags names every
// flag, and each row's default is the flag's (the named constant the flag
// is defined with), so the docs cannot drift from the code.
func TestConfigurationDoc_ServeDefaults(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || !strings.HasPrefix(cells[0], "| `--") {
			continue
		}
		for _, name := range strings.Split(strings.TrimPrefix(cells[0], "| "), ", ") {
			rows[strings.Trim(name, "`-")] = cells[2]
		}
	}
	e := newFlags("serve", func(string) string { return "" }, io.Discard)
	var cfg Config
	serverFlags(e, &cfg)
	e.fs.VisitAll(func(f *flag.Flag) {
		row, ok := rows[f.Name]
		if !ok {
			t.Errorf("docs/configuration.md's serve table has no row for --%s", f.Name)
			return
		}
		if f.DefValue == "" || f.DefValue == "0" || f.DefValue == "0s" || f.DefValue == "false" {
			return // off: the row says so in words
		}
		want := f.DefValue
		if alt, ok := map[string]string{"720h0m0s": "720h", "2160h0m0s": "2160h", "24h0m0s": "24h", "120h0m0s": "120h", "168h0m0s": "168h", "1h0m0s": "1h"}[want]; ok {
			want = alt
		}
		if !strings.Contains(row, want) {
			t.Errorf("docs/configuration.md's --%s default is %q; the flag's is %s", f.Name, row, want)
		}
	})
}
