package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// GET /v1/sends?recipient= finds the sends with the address in to, cc or
// bcc, newest first, whatever case or display name the send or the query
// gave it; combined with a tag; and bad input is a 422 naming the field.
func TestListSends_ByRecipient(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		bodies := []map[string]any{
			{"to": `"Ada L" <Ada@Example.com>`, "tags": map[string]string{"plan": "gold"}},
			{"to": "bob@example.com", "cc": []string{"ada@example.com"}},
			{"to": "bob@example.com", "bcc": []string{"ADA@example.com"}, "tags": map[string]string{"plan": "gold"}},
			{"to": "bob@example.com"},
		}
		var ids []string
		for i, extra := range bodies {
			body := sendoncetest.Mail("", fmt.Sprint("s", i))
			for k, v := range extra {
				body[k] = v
			}
			r := env.Send(t, fmt.Sprint("rcpt-", i), body)
			id, ok := r.JSON(t)["id"].(string)
			if !ok {
				t.Fatalf("send %d: %d %s", i, r.Status, r.Body)
			}
			ids = append(ids, id)
		}
		list := func(q string) []string {
			r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends?" + q, Key: env.AdminKey})
			if r.Status != http.StatusOK {
				t.Fatalf("GET /v1/sends?%s: %d %s", q, r.Status, r.Body)
			}
			out := []string{}
			for _, d := range r.JSON(t)["data"].([]any) {
				out = append(out, d.(map[string]any)["id"].(string))
			}
			return out
		}
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"recipient=ada@example.com", []string{ids[2], ids[1], ids[0]}},
			{"recipient=" + url.QueryEscape("Ada <ADA@example.COM>"), []string{ids[2], ids[1], ids[0]}},
			{"recipient=bob@example.com&tag=plan:gold", []string{ids[2]}},
			{"recipient=ada@example.com&limit=1&after=" + ids[2], []string{ids[1]}},
			{"recipient=nobody@example.com", []string{}},
		} {
			if got := list(c.query); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.query, got, c.want)
			}
		}
		for _, bad := range []string{"not-an-address", url.QueryEscape("ada@example.com\r\nX-Evil: 1"), "%0aada@example.com"} {
			r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends?recipient=" + bad, Key: env.AdminKey})
			if r.Status != http.StatusUnprocessableEntity {
				t.Errorf("recipient=%s: %d %s, want 422", bad, r.Status, r.Body)
				continue
			}
			if p, _ := r.JSON(t)["error"].(map[string]any)["param"].(string); p != "recipient" {
				t.Errorf("recipient=%s: param %q, want recipient", bad, p)
			}
		}
	})
}
