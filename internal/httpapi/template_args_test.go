package httpapi_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestTemplates_ManyArgumentsRefused: the template bomb's third form over
// HTTP. A stored template whose call names a large variable many times is
// refused when stored (422); one within the argument bound, or one fed a
// request's variable of megabytes, is refused by the preview of a
// send+read key with a 422 — and the server allocates a few MiB for it,
// not the hundreds it took when a call's arguments were formatted before
// anything counted them.
func TestTemplates_ManyArgumentsRefused(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true, NoWorkers: true})
	_, sender := env.NewKey(t, app.NewKeyParams{Name: "sender", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
	var chain strings.Builder
	chain.WriteString(`{{$a0 := "aaaaaaaaaaaaaaaa"}}`)
	for i := 1; i <= 15; i++ {
		fmt.Fprintf(&chain, `{{$a%d := print $a%d $a%d}}`, i, i-1, i-1)
	}
	put := func(id, text string) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/" + id, Key: env.AdminKey, Body: map[string]string{"subject": "s", "text": text}})
	}
	if r := put("bomb", chain.String()+`{{$y := print`+strings.Repeat(" $a15", 256)+`}}{{len $y}}`); r.Status != 422 || r.ErrorCode() != "validation_error" {
		t.Errorf("PUT a call of 256 arguments: %d %s, want 422", r.Status, r.Body)
	}
	if r := put("wide", chain.String()+`{{$y := print`+strings.Repeat(" $a15", 32)+`}}{{len $y}}`); r.Status/100 != 2 {
		t.Fatalf("PUT wide: %d %s", r.Status, r.Body)
	}
	if r := put("vars", `{{$y := print`+strings.Repeat(" .big", 32)+`}}{{len $y}}`); r.Status/100 != 2 {
		t.Fatalf("PUT vars: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		id   string
		vars map[string]any
	}{
		{"wide", nil},
		{"vars", map[string]any{"big": strings.Repeat("b", 3<<20)}},
	} {
		body := map[string]any{"to": "ann@example.com", "template_id": c.id, "variables": c.vars}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send/preview", Key: sender, Body: body})
		runtime.ReadMemStats(&after)
		if r.Status != 422 || r.ErrorCode() != "validation_error" {
			t.Errorf("preview %s: %d %s, want 422", c.id, r.Status, r.Body)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("preview %s: allocated %d MiB", c.id, grew>>20)
		}
	}
}
