package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/idempotency/idempotencytest"
	"github.com/sendonce/sendonce/idempotency/redisstore"
	"github.com/sendonce/sendonce/internal/testkit/redistest"
)

// TestConformance runs the idempotency.Store specification against Redis.
func TestConformance(t *testing.T) {
	idempotencytest.RunStore(t, func(t testing.TB) idempotency.Store {
		c := redistest.Client(t)
		return redisstore.New(c, redistest.Prefix(t, c))
	})
}

// TestNew_DefaultPrefix: with no prefix given, keys are named under
// "idempotency:" (the documented default), so two stores without one meet.
func TestNew_DefaultPrefix(t *testing.T) {
	c := redistest.Client(t)
	ctx := t.Context()
	sc := idempotency.Scope{Tenant: "t-" + redistest.Prefix(t, c), Method: "POST", Route: "/x", Key: "k"}
	a, b := redisstore.New(c, ""), redisstore.New(c, "")
	d, err := a.Reserve(ctx, sc, "fp", time.Now(), time.Minute)
	if err != nil || d.Outcome != idempotency.Proceed {
		t.Fatalf("first Reserve = %v, %v; want proceed", d.Outcome, err)
	}
	t.Cleanup(func() { _ = a.Release(context.WithoutCancel(ctx), sc, d.Token) })
	d2, err := b.Reserve(ctx, sc, "fp", time.Now(), time.Minute)
	if err != nil || d2.Outcome != idempotency.InUse {
		t.Fatalf("second store's Reserve = %v, %v; want in_use (same default prefix)", d2.Outcome, err)
	}
	keys, err := c.Keys(ctx, "idempotency:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys under idempotency:* = %v, %v; want the record", keys, err)
	}
}
