package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// A write step that refuses after it wrote (the tenth email of a batch,
// say) must not commit its writes with the stored refusal: the key's
// answer is the refusal, and "all or none" holds (docs/api.md, "Idempotency"). The test is
// about the seam between the idempotent wrapper and its write steps, so it
// registers a write step of its own on a real store.
func TestIdempotent_WriteStepRefusalRollsBackItsWrites(t *testing.T) {
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sendonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc := app.New(store, app.Config{}, nil)
	key, _, err := svc.CreateKey(ctx, app.NewKeyParams{Name: "k", Scopes: []core.Scope{core.ScopeSend}})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(svc, nil, kit.Config{Reads: store}, nil)
	h := s.Idempotent(kit.PostOpts{}, func(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
		send, err := s.Svc.PrepareSend(ctx, key, idemKey, &app.SendRequest{
			To: []string{"ada@example.com"}, Subject: "part one", Text: "hi"})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, tx core.Tx) (int, any, error) {
			if err := s.Svc.AcceptSend(ctx, tx, key, send); err != nil {
				return 0, nil, err
			}
			return 0, nil, core.Errorf(core.CodeValidation, "[1].to", "the second part is invalid")
		}, nil
	})
	do := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/test", strings.NewReader(`{"n":1}`))
		r.Header.Set("Idempotency-Key", "k1")
		r = r.WithContext(context.WithValue(r.Context(), kit.APIKeyCtx, key))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := do()
	if first.Code != http.StatusUnprocessableEntity {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	var n int
	if err := store.QueryRow(ctx, `SELECT COUNT(*) FROM sends`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d sends committed with the refusal (%v); want none", n, err)
	}
	again := do()
	if again.Code != first.Code || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("retry: %d replayed=%q %s; want the stored refusal", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body)
	}
}
