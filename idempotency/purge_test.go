package idempotency

import (
	"context"
	"testing"
	"time"
)

// Every store that purges drops a record exactly when it is expired
// (Record.Expired): a reservation at the end of its lease, a completed key
// at the end of its TTL, and not a microsecond before.
func TestPurge_DropsExactlyTheExpiredRecords(t *testing.T) {
	ctx := context.Background()
	type purger func(now time.Time) int
	for _, c := range []struct {
		name string
		open func(t *testing.T) (Store, purger)
	}{
		{"memory", func(*testing.T) (Store, purger) {
			m := NewMemoryStore()
			return m, m.Purge
		}},
		{"sqlite", func(t *testing.T) (Store, purger) { return sqlPurger(t, openSQLite(t)) }},
		{"postgres", func(t *testing.T) (Store, purger) { return sqlPurger(t, openPostgres(t)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, purge := c.open(t)
			t0 := time.Unix(1_700_000_000, 0)
			lease, ttl := time.Minute, 2*time.Minute
			held := Scope{Tenant: "t", Method: "POST", Route: "/orders", Key: "held"}
			done := held
			done.Key = "done"
			if _, err := s.Reserve(ctx, held, "fp", t0, lease); err != nil {
				t.Fatal(err)
			}
			d, err := s.Reserve(ctx, done, "fp", t0, lease)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Complete(ctx, done, d.Token, Response{Status: 201}, t0, t0.Add(ttl)); err != nil {
				t.Fatal(err)
			}
			for _, step := range []struct {
				at   time.Time
				want int
			}{
				{t0.Add(lease - time.Microsecond), 0},
				{t0.Add(lease), 1}, // the reservation
				{t0.Add(ttl - time.Microsecond), 0},
				{t0.Add(ttl), 1}, // the completed key
			} {
				if n := purge(step.at); n != step.want {
					t.Fatalf("purge at t0+%v dropped %d, want %d", step.at.Sub(t0), n, step.want)
				}
			}
		})
	}
}

func sqlPurger(t *testing.T, s *SQLStore) (Store, func(time.Time) int) {
	return s, func(now time.Time) int {
		t.Helper()
		n, err := s.Purge(context.Background(), now)
		if err != nil {
			t.Fatalf("purge: %v", err)
		}
		return int(n)
	}
}
