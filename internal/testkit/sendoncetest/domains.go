package sendoncetest

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// AddDomain adds a sending domain through POST /v1/domains with body
// ({"domain": …, and any other field}) and returns its DKIM record as a
// zone-file line, for a dnstest server to publish.
func (e *Env) AddDomain(t testing.TB, body map[string]string) string {
	t.Helper()
	r := e.Do(t, Request{Method: "POST", Path: "/v1/domains", Key: e.AdminKey, IdemKey: rand.Text(), Body: body})
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /v1/domains: %d %s", r.Status, r.Body)
	}
	recs, _ := r.JSON(t)["records"].([]any)
	for _, rec := range recs {
		m, _ := rec.(map[string]any)
		if m["purpose"] != "dkim" {
			continue
		}
		var quoted []string
		for _, s := range m["strings"].([]any) {
			quoted = append(quoted, fmt.Sprintf("%q", s))
		}
		return fmt.Sprintf("%s. 300 IN TXT %s", m["name"], strings.Join(quoted, " "))
	}
	t.Fatalf("no dkim record in %s", r.Body)
	return ""
}
