package transport_test

import (
	"context"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/transport"
)

// Plan groups domains whose exchangers are the same into one destination,
// and keeps answers for their TTL: a backlog to one domain asks once.
func TestMXPlan(t *testing.T) {
	dnsSrv := dnstest.Start(t,
		"a.test. 300 MX 10 mx1.shared.test.", "a.test. 300 MX 20 mx2.shared.test.",
		"b.test. 300 MX 20 mx2.shared.test.", "b.test. 300 MX 10 MX1.shared.test.",
		"c.test. 300 MX 10 mx.c.test.",
		"gone.test. 300 MX 0 .",
	)
	m := transport.NewMX(mxConfig(dnsSrv))
	for range 3 {
		dests, refused, err := m.Plan(context.Background(), []string{"x@a.test", "y@c.test", "z@b.test", "n@gone.test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(dests) != 2 || dests[0].Key != "mx1.shared.test,mx2.shared.test" || len(dests[0].Rcpts) != 2 || dests[1].Key != "mx.c.test" {
			t.Fatalf("destinations %+v", dests)
		}
		if len(refused) != 1 || refused[0].Recipient != "n@gone.test" || refused[0].Err.Class != transport.Permanent {
			t.Fatalf("refused %+v", refused)
		}
	}
	if n := queriesOf(dnsSrv, "MX"); n != 4 {
		t.Errorf("%d MX queries for three plans of four domains, want 4 (answers kept for their TTL)", n)
	}
}

// A resolver that fails _mta-sts lookups is not asked again at every
// plan (each failure may cost a timeout), and the mail goes on without a
// policy.
func TestMXPlan_STSLookupFailureIsNotRepeated(t *testing.T) {
	dnsSrv := dnstest.StartWithOptions(t, dnstest.Options{
		Records:  []string{"a.test. 300 MX 10 mx.a.test."},
		ServFail: []string{"_mta-sts.a.test"},
	})
	cfg := mxConfig(dnsSrv)
	cfg.MTASTS = true
	m := transport.NewMX(cfg)
	for range 3 {
		dests, _, err := m.Plan(context.Background(), []string{"x@a.test"})
		if err != nil || len(dests) != 1 {
			t.Fatalf("Plan: %v %+v", err, dests)
		}
	}
	if n := queriesOf(dnsSrv, "TXT"); n != 1 {
		t.Errorf("%d _mta-sts lookups for three plans after a failure, want 1", n)
	}
}

// queriesOf counts the queries of type typ the DNS server was asked.
func queriesOf(srv *dnstest.Server, typ string) int {
	n := 0
	for _, q := range srv.Queries() {
		if q.Type == typ {
			n++
		}
	}
	return n
}
