package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestTemplates_UnboundedRefused: the template of issue 15, which used to
// exhaust the process's memory on its first send or preview, is refused
// when stored; one that data makes unbounded fails its send with a 422.
func TestTemplates_UnboundedRefused(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true})
	do := func(method, path string, body any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: env.AdminKey, Body: body})
	}
	r := do("PUT", "/v1/templates/bomb", map[string]string{"subject": "x", "text": `{{range 1000000000}}{{printf "%0999999d" 0}}{{end}}`})
	if r.Status != 422 || r.ErrorCode() != "validation_error" {
		t.Fatalf("PUT bomb: %d %s", r.Status, r.Body)
	}
	if r := do("PUT", "/v1/templates/nested", map[string]string{"subject": "x", "text": `{{range .a}}{{range $.a}}{{range $.a}}{{.}}{{end}}{{end}}{{end}}`}); r.Status/100 != 2 {
		t.Fatalf("PUT nested: %d %s", r.Status, r.Body)
	}
	a := make([]string, 1000)
	for i := range a {
		a[i] = strings.Repeat("z", 100)
	}
	start := time.Now()
	r = do("POST", "/v1/send", map[string]any{"to": "ann@example.com", "template_id": "nested", "variables": map[string]any{"a": a}})
	if r.Status != 422 || r.ErrorCode() != "validation_error" {
		t.Fatalf("send with nested: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusal took %v", d)
	}
}
