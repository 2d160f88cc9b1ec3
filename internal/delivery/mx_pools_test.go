package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// poolsEnv starts an instance delivering by mx to an exchanger on
// 127.0.0.8 for pools.test, with the egress options in o.
func poolsEnv(t *testing.T, backend sendoncetest.Backend, o sendoncetest.Options) (*sendoncetest.Env, *smtptest.Server) {
	t.Helper()
	mx := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.8:0"})
	dns := dnstest.Start(t, "pools.test. MX 10 mx.pools.test.", "mx.pools.test. A 127.0.0.8")
	o.Backend, o.MX, o.MXPort, o.DNSResolver = backend, true, mx.Port, dns.Addr()
	return sendoncetest.Start(t, o), mx
}

// sentFrom counts the messages the exchanger got from each address, for
// the recipient rcpt.
func sentFrom(mx *smtptest.Server, rcpt string) map[string]int {
	n := map[string]int{}
	for _, m := range mx.Messages() {
		if len(m.To) == 1 && m.To[0] == rcpt {
			n[m.RemoteIP]++
		}
	}
	return n
}

// TestMX_StreamPools: with --stream-pool bulk=bulk, bulk mail leaves from
// the bulk pool's address and transactional mail from the other source,
// alternating to one destination (so kept sessions are never lent across
// pools).
func TestMX_StreamPools(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env, mx := poolsEnv(t, backend, sendoncetest.Options{
			EgressSources: []string{"main=127.0.0.5", "news=127.0.0.6"},
			EgressPools:   []string{"bulk=news"}, StreamPools: []string{"bulk=bulk"}})
		for range 3 {
			for _, b := range []map[string]any{
				{"to": "ann@pools.test", "subject": "reset", "text": "x"},
				{"to": "bob@pools.test", "subject": "news", "text": "x", "stream": "bulk"},
			} {
				env.WaitStatus(t, send(t, env, b), waitLong, core.StatusDelivered)
			}
		}
		if got := sentFrom(mx, "ann@pools.test"); len(got) != 1 || got["127.0.0.5"] != 3 {
			t.Errorf("transactional mail came from %v, want 3 from 127.0.0.5", got)
		}
		if got := sentFrom(mx, "bob@pools.test"); len(got) != 1 || got["127.0.0.6"] != 3 {
			t.Errorf("bulk mail came from %v, want 3 from 127.0.0.6 (the bulk pool)", got)
		}
	})
}

// TestMX_WarmupCap: a source warming up since today sends no more than its
// day-1 cap to a destination; the rest overflows to the pool's other
// source, and with no other source it waits (queued, no attempt spent,
// not failed) for the next day.
func TestMX_WarmupCap(t *testing.T) {
	// The server's clock stands at noon UTC today, so a run across
	// midnight cannot see the warming source's day change between its
	// sends and its check.
	clock := &sendoncetest.Clock{}
	now := time.Now().UTC()
	clock.Advance(now.Truncate(24 * time.Hour).Add(12 * time.Hour).Sub(now))
	today := clock.Now().UTC().Format(time.DateOnly)
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		t.Run("overflow", func(t *testing.T) {
			env, mx := poolsEnv(t, backend, sendoncetest.Options{Clock: clock,
				EgressSources: []string{"fresh=127.0.0.5", "warm=127.0.0.6"},
				EgressPools:   []string{"main=fresh:3,warm:1"}, StreamPools: []string{"transactional=main"},
				EgressWarmups: []string{"fresh=" + today}, WarmupSchedule: []int{2}})
			for range 5 {
				env.WaitStatus(t, send(t, env, map[string]any{"to": "ann@pools.test", "subject": "s", "text": "x"}), waitLong, core.StatusDelivered)
			}
			if got := sentFrom(mx, "ann@pools.test"); got["127.0.0.5"] != 2 || got["127.0.0.6"] != 3 {
				t.Errorf("mail came from %v, want 2 from the warming source (its cap) and 3 from the warm one", got)
			}
		})
		t.Run("wait", func(t *testing.T) {
			env, mx := poolsEnv(t, backend, sendoncetest.Options{Clock: clock,
				EgressSources: []string{"fresh=127.0.0.5"},
				EgressWarmups: []string{"fresh=" + today}, WarmupSchedule: []int{2}})
			for range 2 {
				env.WaitStatus(t, send(t, env, map[string]any{"to": "ann@pools.test", "subject": "s", "text": "x"}), waitLong, core.StatusDelivered)
			}
			id := send(t, env, map[string]any{"to": "ann@pools.test", "subject": "s", "text": "x"})
			tomorrow := clock.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
			var got *core.Send
			for deadline := time.Now().Add(waitLong); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				var err error
				if got, err = env.Server.Store.Send(context.Background(), "default", id); err != nil {
					t.Fatal(err)
				}
				if got.Status == core.StatusQueued && got.NextAttemptAt != nil && !got.NextAttemptAt.Before(tomorrow) {
					break // the attempt found the cap and put the send off
				}
			}
			if got.Status != core.StatusQueued || got.NextAttemptAt == nil || got.NextAttemptAt.Before(tomorrow) || got.Tries != 0 || got.Attempts != 0 {
				t.Errorf("past the cap: status %s, due %v, tries %d, attempts %d; want queued until %v, no try spent",
					got.Status, got.NextAttemptAt, got.Tries, got.Attempts, tomorrow)
			}
			if n := len(mx.Messages()); n != 2 {
				t.Errorf("the exchanger got %d messages, want the cap's 2", n)
			}
		})
	})
}
