package app_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

func codeOf(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// TestValidateTemplate_RefusesUnbounded: templates whose work is obviously
// unbounded are refused when stored, in any part.
func TestValidateTemplate_RefusesUnbounded(t *testing.T) {
	for _, src := range []string{
		`{{range 1000000000}}{{printf "%0999999d" 0}}{{end}}`,
		`{{range 1000000000}}x{{end}}`,
		`{{printf "%0999999999d" 0}}`,
		`{{printf "%.999999f" 1.0}}`,
		`{{printf "%0*d" 999999999 0}}`,
		`{{define "a"}}{{template "a" .}}{{template "a" .}}{{end}}{{template "a" .}}`,
		`{{block "b" .}}x{{end}}`,
	} {
		for _, part := range []string{"subject", "text", "html"} {
			tpl := &core.Template{Subject: "s", Text: "t"}
			switch part {
			case "subject":
				tpl.Subject = src
			case "text":
				tpl.Text = src
			case "html":
				tpl.HTML = src
			}
			err := app.ValidateTemplate(tpl)
			if codeOf(err) != core.CodeValidation {
				t.Errorf("%s %q: ValidateTemplate = %v, want a validation error", part, src, err)
			}
		}
	}
	ok := &core.Template{Subject: "Hi {{.name}}", Text: `{{range .items}}{{printf "%-10s %5d" .n .q}}{{end}}{{range 3}}.{{end}}`, HTML: `<p>{{range .items}}{{.n}}{{end}}</p>`}
	if err := app.ValidateTemplate(ok); err != nil {
		t.Fatalf("a reasonable template: %v", err)
	}
}

// TestRenderTemplate_Bounded: what data makes unbounded at render time is
// stopped by the iteration budget, the output cap and the time bound,
// with a 422, never an out-of-memory or a hang.
func TestRenderTemplate_Bounded(t *testing.T) {
	thousand := make([]any, 1000)
	for i := range thousand {
		thousand[i] = strings.Repeat("y", 1000)
	}
	tests := []struct {
		name string
		tpl  core.Template
		vars map[string]any
	}{
		{"nested ranges, text", core.Template{Subject: "s", Text: `{{range .a}}{{range $.a}}{{range $.a}}x{{end}}{{end}}{{end}}`}, map[string]any{"a": thousand}},
		{"nested ranges, html", core.Template{Subject: "s", HTML: `{{range .a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}`}, map[string]any{"a": thousand}},
		{"huge output", core.Template{Subject: "s", Text: `{{range .a}}{{range $.a}}{{.}}{{end}}{{end}}`}, map[string]any{"a": thousand}},
		{"format from the request", core.Template{Subject: "s", Text: `{{printf .f 0}}`}, map[string]any{"f": "%0999999999d"}},
		{"subject", core.Template{Subject: `{{range .a}}{{range $.a}}{{.}}{{end}}{{end}}`, Text: "t"}, map[string]any{"a": thousand}},
	}
	for _, tt := range tests {
		start := time.Now()
		_, _, _, err := app.RenderTemplate(&tt.tpl, tt.vars)
		if codeOf(err) != core.CodeValidation {
			t.Errorf("%s: RenderTemplate = %v, want a validation error", tt.name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", tt.name, d)
		}
	}
	subject, text, html, err := app.RenderTemplate(&core.Template{Subject: "Hi {{.n}}", Text: `{{range .a}}{{printf "%3d" .}}{{end}}`, HTML: `<b>{{.n}}</b>`},
		map[string]any{"n": "<Ada>", "a": []any{1, 2}})
	if err != nil || subject != "Hi <Ada>" || text != "  1  2" || html != "<b>&lt;Ada&gt;</b>" {
		t.Fatalf("RenderTemplate = %q %q %q %v", subject, text, html, err)
	}
}

// TestTemplates_GrowingVariablesAreBounded: a variable built from itself
// grows without the writer seeing it. Reassignment in a loop (the bomb
// that built 268 MB from `range 24`) is refused when stored; a chain of
// declarations, each twice the one before, and the same through html,
// js, urlquery and println, stops at the render's byte budget with a 422
// — and takes little memory on the way.
func TestTemplates_GrowingVariablesAreBounded(t *testing.T) {
	bomb := `{{$x := "aaaaaaaaaaaaaaaa"}}{{range 30}}{{$x = print $x $x}}{{end}}len={{len $x}}`
	for _, part := range []string{"text", "html"} {
		tpl := &core.Template{Subject: "s", Text: "t"}
		if part == "text" {
			tpl.Text = bomb
		} else {
			tpl.HTML = bomb
		}
		if err := app.ValidateTemplate(tpl); codeOf(err) != core.CodeValidation || !strings.Contains(err.Error(), "assign") {
			t.Errorf("%s: storing the reassignment bomb: %v, want refused", part, err)
		}
		if _, _, _, err := app.RenderTemplate(tpl, nil); codeOf(err) != core.CodeValidation {
			t.Errorf("%s: rendering the reassignment bomb: %v, want a validation error", part, err)
		}
	}
	chain := func(fn string) string {
		var b strings.Builder
		b.WriteString(`{{$v0 := "aaaaaaaaaaaaaaaa"}}`)
		for i := 1; i <= 40; i++ {
			fmt.Fprintf(&b, `{{$v%d := %s $v%d $v%d}}`, i, fn, i-1, i-1)
		}
		b.WriteString(`{{len $v40}}`)
		return b.String()
	}
	for _, fn := range []string{"print", "println", "html", "js", "urlquery", `printf "%s%s"`} {
		for _, part := range []string{"text", "html"} {
			tpl := &core.Template{Subject: "s", Text: "t"}
			if part == "text" {
				tpl.Text = chain(fn)
			} else {
				tpl.HTML = chain(fn)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _, _, err := app.RenderTemplate(tpl, nil)
			runtime.ReadMemStats(&after)
			if codeOf(err) != core.CodeValidation {
				t.Errorf("%s chain in %s: %v, want a validation error", fn, part, err)
			}
			// 2^40 × 16 bytes unbounded; the budget allows a few MiB.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
				t.Errorf("%s chain in %s: allocated %d MiB", fn, part, grew>>20)
			}
		}
	}
}
