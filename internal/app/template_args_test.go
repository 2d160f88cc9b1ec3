package app_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// doubled is a template prefix that declares $a0 … $aN, each twice the
// one before, starting from 16 bytes: $a15 is 512 KiB.
func doubled(n int) string {
	var b strings.Builder
	b.WriteString(`{{$a0 := "aaaaaaaaaaaaaaaa"}}`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{{$a%d := print $a%d $a%d}}`, i, i-1, i-1)
	}
	return b.String()
}

// call is `fn arg arg …` with arg named n times.
func call(fn, arg string, n int) string {
	return fn + strings.Repeat(" "+arg, n)
}

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestTemplates_ManyArgumentsAreBounded: the template bomb's third form.
// One call may name a large value many times ({{print $a15 $a15 …}}), or a
// request's variable of megabytes, and fmt builds the whole result before
// anything counts it: 256 × 512 KiB took a GiB. A call with many arguments
// is refused when stored and when rendered; what a call reads is counted
// before it formats; the request's variables count too. Each form is a
// 422 that allocates a few MiB at most.
func TestTemplates_ManyArgumentsAreBounded(t *testing.T) {
	big := strings.Repeat("<", 3<<20) // 3 MiB: html escapes it to 12
	huge := strings.Repeat("<", 12<<20)
	tests := []struct {
		name   string
		src    string
		vars   map[string]any
		stored bool // refused when stored, not only when rendered
	}{
		{"256 arguments", doubled(15) + `{{$y := ` + call("print", "$a15", 256) + `}}{{len $y}}`, nil, true},
		{"4096 arguments", doubled(15) + `{{$y := ` + call("print", "$a15", 4096) + `}}{{len $y}}`, nil, true},
		{"256 arguments to and", `{{` + call("and", "1", 256) + `}}`, nil, true},
		{"32 variables, print", doubled(15) + `{{$y := ` + call("print", "$a15", 32) + `}}{{len $y}}`, nil, false},
		{"32 variables, printf", doubled(15) + `{{$y := ` + call(`printf "%s"`, "$a15", 31) + `}}{{len $y}}`, nil, false},
		{"32 variables, html", doubled(15) + `{{$y := ` + call("html", "$a15", 32) + `}}{{len $y}}`, nil, false},
		{"request variable, print", `{{$y := ` + call("print", ".big", 32) + `}}{{len $y}}`, map[string]any{"big": big}, false},
		{"request variable, urlquery", `{{$y := ` + call("urlquery", ".big", 8) + `}}{{len $y}}`, map[string]any{"big": big}, false},
		{"request variable in a list", `{{$y := ` + call("print", ".l", 32) + `}}{{len $y}}`, map[string]any{"l": []any{big}}, false},
		{"request variable written", `{{.huge}}`, map[string]any{"huge": huge}, false},
	}
	for _, tt := range tests {
		for _, part := range []string{"text", "html"} {
			tpl := &core.Template{Subject: "s", Text: "t"}
			if part == "text" {
				tpl.Text = tt.src
			} else {
				tpl.HTML = tt.src
			}
			err := app.ValidateTemplate(tpl)
			if tt.stored && (codeOf(err) != core.CodeValidation || !strings.Contains(err.Error(), "arguments")) {
				t.Errorf("%s in %s: storing: %v, want refused", tt.name, part, err)
			}
			if !tt.stored && err != nil {
				t.Errorf("%s in %s: storing: %v, want accepted (the data makes it large)", tt.name, part, err)
			}
			var rerr error
			grew := allocated(func() { _, _, _, rerr = app.RenderTemplate(tpl, tt.vars) })
			if codeOf(rerr) != core.CodeValidation {
				t.Errorf("%s in %s: rendering: %v, want a validation error", tt.name, part, rerr)
			}
			if grew > 16<<20 {
				t.Errorf("%s in %s: rendering allocated %d MiB", tt.name, part, grew>>20)
			}
		}
	}
}

// TestTemplates_ArgumentsWithinBoundsRender: what a message template does
// with its calls still renders: a printf of a few fields, print over a
// list, a variable of a few hundred KiB used a few times.
func TestTemplates_ArgumentsWithinBoundsRender(t *testing.T) {
	body := strings.Repeat("b", 200<<10)
	tpl := &core.Template{
		Subject: `{{printf "%s #%v for %s" .what .n .who}}`,
		Text:    `{{print .items}} {{len (print .body .body .body)}} {{urlquery .who}}`,
		HTML:    `<p>{{len (printf "%s%s" .body .what)}}</p>`,
	}
	if err := app.ValidateTemplate(tpl); err != nil {
		t.Fatalf("storing: %v", err)
	}
	subject, text, html, err := app.RenderTemplate(tpl, map[string]any{
		"what": "Invoice", "n": 7.0, "who": "Ada & co", "items": []any{"a", 1.0, map[string]any{"k": true}}, "body": body,
	})
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	if subject != "Invoice #7 for Ada & co" || text != "[a 1 map[k:true]] 614400 Ada+%26+co" || html != "<p>204807</p>" {
		t.Errorf("rendered %q, %q, %q", subject, text, html)
	}
}
