package idempotency

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkReplay measures one replayed request through the middleware,
// per store: fingerprinting the body, one Reserve that finds the completed
// key, and writing the stored response.
func BenchmarkReplay(b *testing.B) {
	const body = `{"to":"ada@example.com","subject":"Hello","text":"Welcome aboard."}`
	for _, sc := range storeCases() {
		b.Run(sc.name, func(b *testing.B) {
			h := Middleware(sc.open(b), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				w.Write([]byte(`{"id":"snd_01","status":"queued"}`))
			}))
			req := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/v1/send", strings.NewReader(body))
				r.Header.Set("Idempotency-Key", "bench-key")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			if w := req(); w.Code != 201 {
				b.Fatalf("first request: %d", w.Code)
			}
			b.ReportAllocs()
			for b.Loop() {
				if w := req(); w.Header().Get(ReplayedHeader) != "true" {
					b.Fatalf("not replayed: %d", w.Code)
				}
			}
		})
	}
}
