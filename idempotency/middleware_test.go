package idempotency

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// call sends one request through h; key "" sends no Idempotency-Key.
func call(t testing.TB, h http.Handler, method, path, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func wantStatus(t testing.TB, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if code == "" {
		return
	}
	var e struct {
		Error struct{ Code, Message, Param string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code != code {
		t.Fatalf("error body %s, want code %s", w.Body, code)
	}
}

// TestMiddleware runs the rules of docs/api.md ("Idempotency") through the
// middleware on every store.
func TestMiddleware(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			exerciseMiddleware(t, sc.open)
		})
	}
}

func exerciseMiddleware(t *testing.T, open func(testing.TB) Store) {
	// counting handler: answers status with a body that counts its runs.
	type handler struct {
		runs   atomic.Int64
		status atomic.Int64
	}
	newHandler := func(status int) *handler {
		h := &handler{}
		h.status.Store(int64(status))
		return h
	}
	serve := func(h *handler) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			n := h.runs.Add(1)
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Run", fmt.Sprint(n))
			w.WriteHeader(int(h.status.Load()))
			fmt.Fprintf(w, `{"run":%d,"echo":%s}`, n, body)
		}
	}

	t.Run("ReplaysTheFirstResponse", func(t *testing.T) {
		h := newHandler(201)
		mw := Middleware(open(t), nil)(serve(h))
		first := call(t, mw, "POST", "/orders", "k1", `{"a":1,"b":2}`)
		wantStatus(t, first, 201, "")
		if first.Header().Get(ReplayedHeader) != "" {
			t.Fatal("first response carries Idempotent-Replayed")
		}
		second := call(t, mw, "POST", "/orders", "k1", "{ \"b\": 2, \"a\": 1.0 }") // same JSON value
		wantStatus(t, second, 201, "")
		if second.Header().Get(ReplayedHeader) != "true" {
			t.Fatal("replay lacks Idempotent-Replayed: true")
		}
		if second.Body.String() != first.Body.String() || second.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("replayed %q (%s), first %q", second.Body, second.Header().Get("Content-Type"), first.Body)
		}
		if h.runs.Load() != 1 {
			t.Fatalf("handler ran %d times", h.runs.Load())
		}
		// Another route, tenant-less scope: another key.
		wantStatus(t, call(t, mw, "POST", "/other", "k1", `{"a":1,"b":2}`), 201, "")
		if h.runs.Load() != 2 {
			t.Fatalf("handler ran %d times, want 2", h.runs.Load())
		}
	})

	t.Run("ReuseWithAnotherBodyIs422", func(t *testing.T) {
		h := newHandler(201)
		mw := Middleware(open(t), nil)(serve(h))
		wantStatus(t, call(t, mw, "POST", "/orders", "k1", `{"a":1}`), 201, "")
		wantStatus(t, call(t, mw, "POST", "/orders", "k1", `{"a":2}`), 422, CodeKeyReused)
		if h.runs.Load() != 1 {
			t.Fatalf("handler ran %d times", h.runs.Load())
		}
	})

	t.Run("InFlightIs409WithRetryAfter", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		mw := Middleware(open(t), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			w.WriteHeader(201)
		}))
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- call(t, mw, "POST", "/orders", "k1", `{}`) }()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("handler did not start")
		}
		w := call(t, mw, "POST", "/orders", "k1", `{}`)
		wantStatus(t, w, 409, CodeKeyInUse)
		if w.Header().Get("Retry-After") != "1" {
			t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
		}
		wantStatus(t, call(t, mw, "POST", "/orders", "k1", `{"x":1}`), 422, CodeKeyReused)
		close(release)
		wantStatus(t, <-done, 201, "")
		if w := call(t, mw, "POST", "/orders", "k1", `{}`); w.Code != 201 || w.Header().Get(ReplayedHeader) != "true" {
			t.Fatalf("after completion: %d %v", w.Code, w.Header())
		}
	})

	t.Run("StatusesNotStoredReleaseTheKey", func(t *testing.T) {
		for _, status := range []int{500, 503, 401, 403, 409, 429} {
			h := newHandler(status)
			mw := Middleware(open(t), nil)(serve(h))
			wantStatus(t, call(t, mw, "POST", "/orders", "k", `{}`), status, "")
			h.status.Store(201)
			w := call(t, mw, "POST", "/orders", "k", `{}`)
			if w.Code != 201 || w.Header().Get(ReplayedHeader) != "" || h.runs.Load() != 2 {
				t.Fatalf("after %d: retry got %d (replayed %q), handler ran %d times", status, w.Code, w.Header().Get(ReplayedHeader), h.runs.Load())
			}
		}
	})

	t.Run("Handler4xxIsStored", func(t *testing.T) {
		h := newHandler(422)
		mw := Middleware(open(t), nil)(serve(h))
		wantStatus(t, call(t, mw, "POST", "/orders", "k", `{}`), 422, "")
		h.status.Store(201)
		w := call(t, mw, "POST", "/orders", "k", `{}`)
		if w.Code != 422 || w.Header().Get(ReplayedHeader) != "true" || h.runs.Load() != 1 {
			t.Fatalf("got %d replayed=%q runs=%d", w.Code, w.Header().Get(ReplayedHeader), h.runs.Load())
		}
	})

	t.Run("PanicReleasesTheKey", func(t *testing.T) {
		var runs atomic.Int64
		mw := Middleware(open(t), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if runs.Add(1) == 1 {
				panic("boom")
			}
			w.WriteHeader(201)
		}))
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Fatalf("recovered %v, want the handler's panic", p)
				}
			}()
			call(t, mw, "POST", "/orders", "k", `{}`)
		}()
		wantStatus(t, call(t, mw, "POST", "/orders", "k", `{}`), 201, "")
		if runs.Load() != 2 {
			t.Fatalf("handler ran %d times", runs.Load())
		}
	})

	t.Run("OversizedResponseIsSentButNotStored", func(t *testing.T) {
		var runs atomic.Int64
		big := strings.Repeat("x", 100)
		mw := Middleware(open(t), &Options{MaxResponseBytes: 64})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(201)
			io.WriteString(w, big[:50])
			io.WriteString(w, big[50:])
		}))
		for range 2 {
			w := call(t, mw, "POST", "/orders", "k", `{}`)
			if w.Code != 201 || w.Body.String() != big || w.Header().Get(ReplayedHeader) != "" {
				t.Fatalf("got %d %q", w.Code, w.Body)
			}
		}
		if runs.Load() != 2 {
			t.Fatalf("handler ran %d times, want 2 (not stored)", runs.Load())
		}
	})

	t.Run("RequestErrors", func(t *testing.T) {
		h := newHandler(201)
		mw := Middleware(open(t), &Options{RequireKey: true, MaxRequestBytes: 32})(serve(h))
		wantStatus(t, call(t, mw, "POST", "/orders", "", `{}`), 400, CodeKeyRequired)
		wantStatus(t, call(t, mw, "POST", "/orders", "bad key", `{}`), 400, CodeKeyInvalid)
		wantStatus(t, call(t, mw, "POST", "/orders", "k", `{"a":`), 400, CodeInvalidJSON)
		wantStatus(t, call(t, mw, "POST", "/orders", "k", `{"a":"`+strings.Repeat("x", 40)+`"}`), 413, CodePayloadTooLarge)
		wantStatus(t, call(t, mw, "GET", "/orders", "", ``), 201, "") // not a covered method
		if h.runs.Load() != 1 {
			t.Fatalf("handler ran %d times", h.runs.Load())
		}
		// Every 400 above left the key unused.
		wantStatus(t, call(t, mw, "POST", "/orders", "k", `{"b":1}`), 201, "")
	})

	t.Run("EmptyBodyIsTheEmptyObject", func(t *testing.T) {
		h := newHandler(200)
		mw := Middleware(open(t), nil)(serve(h))
		wantStatus(t, call(t, mw, "POST", "/approve", "k", ``), 200, "")
		if w := call(t, mw, "POST", "/approve", "k", `{}`); w.Header().Get(ReplayedHeader) != "true" {
			t.Fatal("{} after an empty body did not replay")
		}
	})

	t.Run("TenantAndCustomErrorWriter", func(t *testing.T) {
		h := newHandler(201)
		var seen []string
		opts := &Options{
			Tenant: func(r *http.Request) string { return r.Header.Get("X-Tenant") },
			ErrorWriter: func(w http.ResponseWriter, r *http.Request, e *Error) {
				seen = append(seen, e.Code)
				w.WriteHeader(e.Status)
			},
		}
		mw := Middleware(open(t), opts)(serve(h))
		req := func(tenant, body string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
			r.Header.Set("Idempotency-Key", "k")
			r.Header.Set("X-Tenant", tenant)
			w := httptest.NewRecorder()
			mw.ServeHTTP(w, r)
			return w
		}
		req("a", `{}`)
		req("b", `{}`)
		if h.runs.Load() != 2 {
			t.Fatalf("two tenants ran %d times, want 2", h.runs.Load())
		}
		if w := req("a", `{"x":1}`); w.Code != 422 || len(seen) != 1 || seen[0] != CodeKeyReused {
			t.Fatalf("custom writer: %d %v", w.Code, seen)
		}
	})
}

// TestMiddleware_ExpiredLeaseIsTakenOver: a request whose holder died runs
// again after the lease; the dead holder's late completion is refused.
func TestMiddleware_ExpiredLeaseIsTakenOver(t *testing.T) {
	store := NewMemoryStore()
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	opts := &Options{Lease: time.Second, Now: func() time.Time { return time.Unix(0, clock.Load()) }}
	var runs atomic.Int64
	mw := Middleware(store, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			// The first holder is slow: the lease runs out under it and a
			// retry takes the key over and completes.
			clock.Add(int64(2 * time.Second))
			inner := call(t, Middleware(store, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.WriteHeader(201)
				io.WriteString(w, "second")
			})), "POST", "/orders", "k", `{}`)
			if inner.Code != 201 {
				t.Errorf("take-over got %d", inner.Code)
			}
		}
		w.WriteHeader(201)
		io.WriteString(w, "first")
	}))
	wantStatus(t, call(t, mw, "POST", "/orders", "k", `{}`), 201, "")
	if w := call(t, mw, "POST", "/orders", "k", `{}`); w.Body.String() != "second" || w.Header().Get(ReplayedHeader) != "true" {
		t.Fatalf("replay %q, want the take-over's response", w.Body)
	}
}

// TestMiddleware_RunInTx: with a SQL store the handler's writes commit with
// the stored response or not at all.
func TestMiddleware_RunInTx(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) (*sql.DB, Dialect)
	}{
		{"sqlite", func(t testing.TB) (*sql.DB, Dialect) { return openSQLiteDB(t), SQLite }},
		{"postgres", func(t testing.TB) (*sql.DB, Dialect) { return openPostgresDB(t), PostgreSQL }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db, dialect := tc.open(t)
			if err := Migrate(ctx, db, dialect); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			store := NewSQLStore(db, dialect)
			var fail atomic.Value // "", "500", "panic"
			fail.Store("")
			var nextID atomic.Int64
			mw := Middleware(store, &Options{RunInTx: true})(WithTx(func(w http.ResponseWriter, r *http.Request, tx *sql.Tx) {
				id := nextID.Add(1)
				if _, err := tx.ExecContext(r.Context(), dialect.Rebind(`INSERT INTO orders (id, item) VALUES (?, ?)`), id, "book"); err != nil {
					t.Errorf("insert: %v", err)
					w.WriteHeader(500)
					return
				}
				switch fail.Load() {
				case "500":
					w.WriteHeader(500)
					return
				case "panic":
					panic(http.ErrAbortHandler)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				fmt.Fprintf(w, `{"id":%d}`, id)
			}))
			count := func() int {
				var n int
				if err := db.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}

			fail.Store("500")
			wantStatus(t, call(t, mw, "POST", "/orders", "k", `{}`), 500, "")
			fail.Store("panic")
			func() {
				defer func() { recover() }()
				call(t, mw, "POST", "/orders", "k", `{}`)
			}()
			if n := count(); n != 0 {
				t.Fatalf("%d orders after 500 and panic, want 0 (rolled back)", n)
			}
			fail.Store("")
			first := call(t, mw, "POST", "/orders", "k", `{}`)
			wantStatus(t, first, 201, "")
			replay := call(t, mw, "POST", "/orders", "k", `{}`)
			if replay.Body.String() != first.Body.String() || replay.Header().Get(ReplayedHeader) != "true" {
				t.Fatalf("replay %q, first %q", replay.Body, first.Body)
			}
			wantStatus(t, call(t, mw, "POST", "/orders", "", `{}`), 201, "") // no key: still one transaction
			if n := count(); n != 2 {
				t.Fatalf("%d orders, want 2", n)
			}
		})
	}
}

// TestMiddleware_RunInTxLostReservationRollsBack: when the lease ran out
// and another request took the key over, the slow holder's writes roll
// back and it answers 409.
func TestMiddleware_RunInTxLostReservationRollsBack(t *testing.T) {
	ctx := context.Background()
	db := openPostgresDB(t)
	if err := Migrate(ctx, db, PostgreSQL); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id SERIAL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	store := NewSQLStore(db, PostgreSQL)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	opts := &Options{RunInTx: true, Lease: time.Second, Now: func() time.Time { return time.Unix(0, clock.Load()) }}
	mw := Middleware(store, opts)(WithTx(func(w http.ResponseWriter, r *http.Request, tx *sql.Tx) {
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO orders DEFAULT VALUES`); err != nil {
			t.Error(err)
		}
		sc, _ := ScopeFromContext(r.Context())
		// Another request takes the key over after the lease.
		clock.Add(int64(2 * time.Second))
		if d, err := store.Reserve(ctx, sc, emptyObjectFingerprint, time.Unix(0, clock.Load()), time.Minute); err != nil || d.Outcome != Proceed {
			t.Errorf("take-over: %v %v", d.Outcome, err)
		}
		w.WriteHeader(201)
	}))
	wantStatus(t, call(t, mw, "POST", "/orders", "k", `{}`), 409, CodeKeyInUse)
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("orders = %d (%v), want 0", n, err)
	}
}

// TestNonTransactionalStores_UniqueConstraintAdvice tests the advice of
// redisstore.Store's doc: without a shared transaction, a handler whose side
// effect happened but whose response was not stored runs again on retry,
// and only its own unique constraint on the key keeps the effect single.
func TestNonTransactionalStores_UniqueConstraintAdvice(t *testing.T) {
	for _, sc := range storeCases() {
		if sc.name != "redis" && sc.name != "memory" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			for _, advised := range []bool{false, true} {
				t.Run(fmt.Sprintf("unique=%v", advised), func(t *testing.T) {
					ctx := context.Background()
					db := openSQLiteDB(t)
					schema := `CREATE TABLE payments (id INTEGER PRIMARY KEY, idem_key TEXT NOT NULL)`
					if advised {
						schema = `CREATE TABLE payments (id INTEGER PRIMARY KEY, idem_key TEXT NOT NULL UNIQUE)`
					}
					if _, err := db.ExecContext(ctx, schema); err != nil {
						t.Fatal(err)
					}
					var attempt atomic.Int64
					mw := Middleware(sc.open(t), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						scope, _ := ScopeFromContext(r.Context())
						key := scope.Tenant + "\x00" + scope.Route + "\x00" + scope.Key
						if advised {
							_, err := db.ExecContext(r.Context(), `INSERT INTO payments (idem_key) VALUES (?) ON CONFLICT (idem_key) DO NOTHING`, key)
							if err != nil {
								t.Error(err)
							}
						} else if _, err := db.ExecContext(r.Context(), `INSERT INTO payments (idem_key) VALUES (?)`, key); err != nil {
							t.Error(err)
						}
						if attempt.Add(1) == 1 {
							// The side effect happened, then the request
							// failed before its response could be stored.
							w.WriteHeader(http.StatusBadGateway)
							return
						}
						var id int64
						if err := db.QueryRowContext(r.Context(), `SELECT min(id) FROM payments WHERE idem_key = ?`, key).Scan(&id); err != nil {
							t.Error(err)
						}
						w.WriteHeader(201)
						fmt.Fprintf(w, `{"payment":%d}`, id)
					}))
					wantStatus(t, call(t, mw, "POST", "/pay", "k", `{"amount":5}`), 502, "")
					retry := call(t, mw, "POST", "/pay", "k", `{"amount":5}`)
					wantStatus(t, retry, 201, "")
					var n int
					if err := db.QueryRowContext(ctx, `SELECT count(*) FROM payments`).Scan(&n); err != nil {
						t.Fatal(err)
					}
					want := 2 // without the constraint the retry pays twice
					if advised {
						want = 1
					}
					if n != want || retry.Body.String() != `{"payment":1}` {
						t.Fatalf("payments = %d, want %d; retry answered %s", n, want, retry.Body)
					}
				})
			}
		})
	}
}

func TestMiddleware_RunInTxNeedsTxStore(t *testing.T) {
	defer func() {
		if p := recover(); p == nil {
			t.Fatal("no panic for RunInTx with a MemoryStore")
		}
	}()
	Middleware(NewMemoryStore(), &Options{RunInTx: true})
}

// errStore fails every call.
type errStore struct{}

var errDown = errors.New("store down")

func (errStore) Reserve(context.Context, Scope, string, time.Time, time.Duration) (Decision, error) {
	return Decision{}, errDown
}
func (errStore) Complete(context.Context, Scope, string, Response, time.Time, time.Time) error {
	return errDown
}
func (errStore) Release(context.Context, Scope, string) error { return errDown }

func TestMiddleware_StoreFailureIs500WithoutDetails(t *testing.T) {
	var logged strings.Builder
	mw := Middleware(errStore{}, &Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})(http.NotFoundHandler())
	w := call(t, mw, "POST", "/orders", "k", `{}`)
	wantStatus(t, w, 500, CodeInternal)
	if strings.Contains(w.Body.String(), "store down") || !strings.Contains(logged.String(), "store down") {
		t.Fatalf("body %s, log %s", w.Body, logged.String())
	}
}
