package app_test

import (
	"errors"
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
