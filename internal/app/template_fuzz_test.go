package app_test

import (
	"errors"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// FuzzRenderTemplate: whatever a stored template's source and a request's
// variable, storing and rendering it answer a coded error or parts within
// the caps: never a panic, an uncoded error or an oversized part.
func FuzzRenderTemplate(f *testing.F) {
	for _, seed := range []struct{ src, v string }{
		{`Hi {{.v}}`, "Ada"},
		{`{{printf "%-10s|%5.2f" .v 3.14159}}`, "x"},
		{`{{range .l}}{{print . $.v}}{{end}}`, "<b>"},
		{`{{$x := "aaaaaaaaaaaaaaaa"}}{{range 30}}{{$x = print $x $x}}{{end}}`, ""},
		{doubled(15) + `{{$y := ` + call("print", "$a15", 40) + `}}{{len $y}}`, ""},
		{`{{$y := ` + call("html", ".v", 32) + `}}{{$y}}`, "<<<<<<<<"},
		{`{{printf .v 0}}`, "%0999999999d"},
		{`{{range .l}}{{range $.l}}{{urlquery . . .}}{{end}}{{end}}`, "&"},
		{`{{define "a"}}{{template "a"}}{{end}}`, ""},
		{`{{if eq .v "a" "b" "c"}}{{js .v}}{{else}}{{println .l .v}}{{end}}`, "'"},
	} {
		f.Add(seed.src, seed.v)
	}
	f.Fuzz(func(t *testing.T, src, v string) {
		vars := map[string]any{"v": v, "l": []any{v, 1.0, true, nil, map[string]any{"k": v}}}
		for _, tpl := range []*core.Template{{Subject: src, Text: "t"}, {Subject: "s", Text: src}, {Subject: "s", HTML: src}} {
			if err := app.ValidateTemplate(tpl); err != nil && codeOf(err) != core.CodeValidation {
				t.Fatalf("ValidateTemplate(%q) = %v, want nil or a validation error", src, err)
			}
			subject, text, html, err := app.RenderTemplate(tpl, vars)
			var ce *core.Error
			switch {
			case err != nil && !errors.As(err, &ce):
				t.Fatalf("RenderTemplate(%q) = %v, an uncoded error", src, err)
			case err != nil && ce.Code != core.CodeValidation && ce.Code != core.CodeTemplateMissingVar:
				t.Fatalf("RenderTemplate(%q) = %v, want a validation error", src, err)
			case len(subject) > app.MaxRenderedBytes || len(text) > app.MaxRenderedBytes || len(html) > app.MaxRenderedBytes:
				t.Fatalf("RenderTemplate(%q) made parts of %d, %d, %d bytes", src, len(subject), len(text), len(html))
			}
		}
	})
}
