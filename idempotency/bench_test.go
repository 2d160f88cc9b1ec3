package idempotency

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkReplay measures one replayed request through the middleware,
// per store: fingerprinting the body, one Reserve that finds the completed
// key, and writing the stored response. BenchmarkReplay_Yardstick is the
// same request answered by a bare handler, so the ratio is what a replay
// adds to the least an answer costs.
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

// BenchmarkReplay_Yardstick is BenchmarkReplay's request answered by a
// bare net/http handler with the same stored response and headers, with
// nothing read or looked up: the request's and the answer's own cost.
func BenchmarkReplay_Yardstick(b *testing.B) {
	const body = `{"to":"ada@example.com","subject":"Hello","text":"Welcome aboard."}`
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(ReplayedHeader, "true")
		w.WriteHeader(201)
		w.Write([]byte(`{"id":"snd_01","status":"queued"}`))
	})
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/send", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", "bench-key")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Header().Get(ReplayedHeader) != "true" {
			b.Fatalf("not answered: %d", w.Code)
		}
	}
}
