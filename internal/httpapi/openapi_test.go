package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/metrics"
)

// TestOpenAPI_CoversEveryRoute fails when a registered route is missing
// from openapi.json or the document names a route nobody serves.
func TestOpenAPI_CoversEveryRoute(t *testing.T) {
	m := metrics.New(func(context.Context) (int, error) { return 0, nil })
	patterns := (&Server{mux: http.NewServeMux(), Base: &kit.Base{Metrics: m}}).routes()

	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	documented := openAPIRoutes(t)
	var served []string
	for _, p := range patterns {
		if !strings.Contains(p, " ") {
			continue // a method-less catch-all (the /v1/ 404 handler) is no route
		}
		served = append(served, p)
	}
	for _, p := range served {
		if !slices.Contains(documented, p) {
			t.Errorf("route %q is served but missing from openapi.json", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(served, p) {
			t.Errorf("openapi.json documents %q, which no route serves", p)
		}
	}
}
