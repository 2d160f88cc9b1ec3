package idempotency_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sendonce/sendonce/idempotency"
)

// Wrap a plain handler: the second request with the same key is answered
// from the store, and the handler runs once.
func ExampleMiddleware() {
	runs := 0
	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, runs)
	})

	store := idempotency.NewMemoryStore() // or redisstore.New, NewSQLStore
	h := idempotency.Middleware(store, &idempotency.Options{RequireKey: true})(createOrder)

	for _, body := range []string{`{"item":"book"}`, `{ "item": "book" }`, `{"item":"pen"}`} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", "order-7f3a")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), w.Body.String())
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 201  {"order":1}
	// 201 true {"order":1}
	// 422  {"error":{"code":"idempotency_key_reused","message":"this Idempotency-Key was already used with a different request body","param":"Idempotency-Key"}}
	// handler runs: 1
}
