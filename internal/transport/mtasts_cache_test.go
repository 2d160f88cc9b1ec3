package transport

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// The policy cache is bounded whatever the policies' max_age: past its
// size the policy fetched longest ago is dropped (here a cache of 3 and
// four domains publishing year-long policies, served over HTTPS on
// loopback and published by a real DNS server).
func TestSTSCache_BoundedDropsOldest(t *testing.T) {
	const n = 4
	ca := smtptest.NewCA(t)
	var names, zone []string
	for i := range n {
		d := fmt.Sprintf("d%d.test", i)
		names = append(names, "mta-sts."+d)
		zone = append(zone, fmt.Sprintf(`_mta-sts.%s. TXT "v=STSv1; id=1"`, d), "mta-sts."+d+". A 127.0.0.1")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fetched := map[string]int{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		mu.Lock()
		fetched[host]++
		mu.Unlock()
		_, _ = w.Write([]byte("version: STSv1\nmode: enforce\nmx: mx.example\nmax_age: 31557600\n"))
	}), TLSConfig: ca.Server(t, names...)}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dns := dnstest.Start(t, zone...)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	c := newSTSCache(MXConfig{MTASTS: true, STSPort: port, RootCAs: pool, DialTimeout: 2 * time.Second, Policy: netpolicy.MustParse("127.0.0.0/8")})
	c.max = 3
	clock := time.Now()
	c.now = func() time.Time { return clock }
	res := &mxResolver{addr: dns.Addr(), timeout: 2 * time.Second}
	for i := range n {
		clock = clock.Add(time.Minute)
		if p := c.policy(t.Context(), res, fmt.Sprintf("d%d.test", i)); p == nil || p.Mode != "enforce" {
			t.Fatalf("d%d.test: policy %+v", i, p)
		}
	}
	var kept []string
	for d := range c.m {
		kept = append(kept, d)
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []string{"d1.test", "d2.test", "d3.test"}) {
		t.Errorf("cache holds %v; want the newest three", kept)
	}
	for i := 1; i < n; i++ {
		if p := c.policy(t.Context(), res, fmt.Sprintf("d%d.test", i)); p == nil {
			t.Fatalf("d%d.test: no policy", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if h := fmt.Sprintf("mta-sts.d%d.test", i); fetched[h] != 1 {
			t.Errorf("%s fetched %d times; want once", h, fetched[h])
		}
	}
}
