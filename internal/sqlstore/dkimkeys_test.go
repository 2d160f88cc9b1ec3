package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// addRotatingDomain stores tenant t's domain name signing with s1 and a
// pending key s2.
func addRotatingDomain(t *testing.T, s *sqlstore.Store, name string, status core.DomainStatus) {
	t.Helper()
	inTx(t, s, func(ctx context.Context, tx core.Tx) error {
		if err := tx.InsertDomain(ctx, &core.Domain{Tenant: "t", Domain: name, Selector: "s1", Algorithm: "ed25519",
			PrivateKey: []byte("key-1"), PublicRecord: "v=DKIM1; k=ed25519; p=one", Status: status, CreatedAt: at(0)}); err != nil {
			return err
		}
		return tx.InsertPendingDKIMKey(ctx, &core.DKIMKey{Tenant: "t", Domain: name, Selector: "s2", Algorithm: "ed25519",
			PrivateKey: []byte("key-2"), PublicRecord: "v=DKIM1; k=ed25519; p=two", Since: at(10)})
	})
}

// TestDKIMKeys_PendingPromotedOnceAndRetiring: one pending key per domain
// (a second, or a selector taken, is a conflict; an unknown domain not
// found); promoting makes it the domain's signing key and the former one
// retiring since the promotion, once; the periodic check's list holds
// the domains with a pending key or not verified; removing a domain
// removes its keys.
func TestDKIMKeys_PendingPromotedOnceAndRetiring(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		addRotatingDomain(t, s, "rot.test", core.DomainVerified)
		for _, k := range []core.DKIMKey{
			{Tenant: "t", Domain: "rot.test", Selector: "s3", PrivateKey: []byte("k")}, // a second pending key
			{Tenant: "t", Domain: "rot.test", Selector: "s2", PrivateKey: []byte("k")}, // a taken selector
		} {
			err := s.InTx(ctx, func(tx core.Tx) error { return tx.InsertPendingDKIMKey(ctx, &k) })
			if core.ErrorCode(err) != core.CodeConflict {
				t.Errorf("pending key %s: %v, want a conflict", k.Selector, err)
			}
		}
		err := s.InTx(ctx, func(tx core.Tx) error {
			return tx.InsertPendingDKIMKey(ctx, &core.DKIMKey{Tenant: "t", Domain: "none.test", Selector: "s2"})
		})
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("pending key of an unknown domain: %v, want not found", err)
		}

		refs, err := s.DomainsToCheck(ctx, core.DomainRef{}, 10)
		if err != nil || !slices.Equal(refs, []core.DomainRef{{Tenant: "t", Domain: "rot.test"}}) {
			t.Fatalf("domains to check with a rotation pending: %v %v", refs, err)
		}

		for i, want := range []bool{true, false} {
			inTx(t, s, func(ctx context.Context, tx core.Tx) error {
				promoted, err := tx.PromoteDKIMKey(ctx, "t", "rot.test", "s2", at(20))
				if err == nil && promoted != want {
					t.Errorf("promotion %d: %v, want %v", i, promoted, want)
				}
				return err
			})
		}
		d, err := s.Domain(ctx, "t", "rot.test")
		if err != nil || d.Selector != "s2" || string(d.PrivateKey) != "key-2" || d.PublicRecord != "v=DKIM1; k=ed25519; p=two" {
			t.Fatalf("domain after promotion: %+v %v", d, err)
		}
		keys, err := s.DKIMKeys(ctx, "t", "rot.test")
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys after promotion: %+v %v", keys, err)
		}
		if k := keys[0]; k.Selector != "s1" || k.State != core.DKIMRetiring || !k.Since.Equal(at(20)) || string(k.PrivateKey) != "key-1" {
			t.Fatalf("former key: %+v", k)
		}
		if refs, err := s.DomainsToCheck(ctx, core.DomainRef{}, 10); err != nil || len(refs) != 0 {
			t.Fatalf("domains to check once promoted and verified: %v %v", refs, err)
		}

		addRotatingDomain(t, s, "a.test", core.DomainNotStarted)
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			return tx.InsertDomain(ctx, &core.Domain{Tenant: "t", Domain: "b.test", Selector: "s1", Algorithm: "ed25519",
				PrivateKey: []byte("k"), PublicRecord: "v=DKIM1", Status: core.DomainFailed, CreatedAt: at(0)})
		})
		refs, err = s.DomainsToCheck(ctx, core.DomainRef{}, 1)
		if err != nil || !slices.Equal(refs, []core.DomainRef{{Tenant: "t", Domain: "a.test"}}) {
			t.Fatalf("first page: %v %v", refs, err)
		}
		refs, err = s.DomainsToCheck(ctx, refs[0], 10)
		if err != nil || !slices.Equal(refs, []core.DomainRef{{Tenant: "t", Domain: "b.test"}}) {
			t.Fatalf("second page: %v %v", refs, err)
		}

		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.DeleteDomain(ctx, "t", "a.test") })
		if keys, err := s.DKIMKeys(ctx, "t", "a.test"); err != nil || len(keys) != 0 {
			t.Fatalf("keys of a removed domain: %+v %v", keys, err)
		}
	})
}

// TestPostgres_TwoProcessesPromoteOnce: two processes (two stores, each
// its own pool) check the same rotation at once. Both read the pending
// key before either removes it (a third transaction holds its row until
// both wait on it); then exactly one promotes, and the other changes
// nothing: the signing key is the new one, and the former key is the one
// retiring row.
func TestPostgres_TwoProcessesPromoteOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	stores := []*sqlstore.Store{openPostgres(t, url), openPostgres(t, url)}
	addRotatingDomain(t, stores[0], "race.test", core.DomainVerified)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lock, err := stores[0].PG.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck // committed below; a no-op then
	if _, err := lock.Exec(ctx, `SELECT 1 FROM domain_dkim_keys WHERE tenant = 't' AND domain = 'race.test' AND selector = 's2' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		promoted = make([]bool, len(stores))
		errs     = make([]error, len(stores))
	)
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.InTx(ctx, func(tx core.Tx) error {
				var err error
				promoted[i], err = tx.PromoteDKIMKey(ctx, "t", "race.test", "s2", at(30))
				return err
			})
		}()
	}
	waitForLockWaiters(ctx, t, stores[0], 2)
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	n := 0
	for i := range stores {
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i, errs[i])
		}
		if promoted[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d processes promoted, want 1", n)
	}
	d, err := stores[1].Domain(ctx, "t", "race.test")
	if err != nil || d.Selector != "s2" {
		t.Fatalf("domain after the race: %+v %v", d, err)
	}
	keys, err := stores[1].DKIMKeys(ctx, "t", "race.test")
	if err != nil || len(keys) != 1 || keys[0].Selector != "s1" || keys[0].State != core.DKIMRetiring {
		t.Fatalf("keys after the race: %+v %v; want s1 alone, retiring", keys, err)
	}
}

// waitForLockWaiters waits until n statements on the database wait for a
// row lock.
func waitForLockWaiters(ctx context.Context, t *testing.T, s *sqlstore.Store, n int) {
	t.Helper()
	for {
		var waiting int
		err := s.PG.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM domain_dkim_keys%'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d promotions wait on the pending key's row, want %d", waiting, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
