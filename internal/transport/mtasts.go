package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// MTA-STS (RFC 8461): a domain publishes "_mta-sts.DOMAIN TXT v=STSv1;
// id=…" and a policy at https://mta-sts.DOMAIN/.well-known/mta-sts.txt
// saying which exchangers are its own and whether senders must use
// verified TLS with them. Under "enforce", a delivery only goes to a
// matching exchanger over TLS whose certificate verifies for its name;
// anything else is deferred, never sent in plain text. "testing" delivers
// all the same and records what the policy would have refused.

// MTA-STS policy modes.
const (
	STSEnforce = "enforce"
	STSTesting = "testing"
	STSNone    = "none"
)

// Bounds of a policy fetch.
const (
	stsMaxBody   = 64 << 10
	stsTimeout   = 10 * time.Second
	stsMaxMaxAge = 31557600 * time.Second // RFC 8461 section 3.2
	// stsRetryFetch is how long a failed fetch is not tried again: a
	// policy host that does not answer must not cost every attempt its
	// timeout.
	stsRetryFetch = 5 * time.Minute
	// stsRetryLookup is the same for a failed TXT lookup.
	stsRetryLookup = time.Minute
)

// stsPolicy is a domain's fetched policy.
type stsPolicy struct {
	Domain  string
	ID      string
	Mode    string
	MX      []string
	MaxAge  time.Duration
	expires time.Time
}

// matches reports whether an exchanger's name matches one of the
// policy's mx patterns ("*.example.net" matches one leftmost label).
func (p *stsPolicy) matches(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, pat := range p.MX {
		pat = strings.ToLower(strings.TrimSuffix(pat, "."))
		if rest, ok := strings.CutPrefix(pat, "*."); ok {
			if label, parent, ok := strings.Cut(host, "."); ok && label != "" && parent == rest {
				return true
			}
			continue
		}
		if host == pat {
			return true
		}
	}
	return false
}

func stsRank(p *stsPolicy) int {
	switch {
	case p == nil:
		return 0
	case p.Mode == STSEnforce:
		return 2
	case p.Mode == STSTesting:
		return 1
	}
	return 0
}

// stricter returns the stricter of two domains' policies.
func stricter(a, b *stsPolicy) *stsPolicy {
	if stsRank(b) > stsRank(a) {
		return b
	}
	return a
}

// stsCache fetches and keeps policies for their max_age.
type stsCache struct {
	port   string
	client *http.Client
	now    func() time.Time

	mu     sync.Mutex
	m      map[string]*stsPolicy
	failed map[string]time.Time // domain → no fetch before
	max    int                  // policies kept (stsMaxPolicies)
}

// stsMaxPolicies bounds the policies kept: every recipient domain may
// publish one with a max_age of a year, so expiry alone does not bound
// them.
const stsMaxPolicies = 10000

// newSTSCache returns nil when MTA-STS is off. Policy fetches resolve
// through the transport's resolver and connect through its outbound
// policy, trusting RootCAs.
func newSTSCache(cfg MXConfig) *stsCache {
	if !cfg.MTASTS {
		return nil
	}
	c := &stsCache{port: cfg.STSPort, now: time.Now, m: map[string]*stsPolicy{}, failed: map[string]time.Time{}, max: stsMaxPolicies}
	dialer := cfg.Policy.Dialer(cfg.DialTimeout)
	tr := &http.Transport{
		Proxy:               nil,
		TLSClientConfig:     &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: stsTimeout,
		DisableKeepAlives:   true,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			res, _ := ctx.Value(stsResolverKey{}).(*mxResolver)
			if res == nil {
				return nil, errors.New("mta-sts: no resolver")
			}
			addrs, err := res.addresses(ctx, host)
			if err != nil {
				return nil, err
			}
			if len(addrs) == 0 {
				return nil, fmt.Errorf("%s has no address", host)
			}
			var last error
			for _, ip := range addrs {
				conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
				if err == nil {
					return conn, nil
				}
				last = err
			}
			return nil, last
		},
	}
	c.client = &http.Client{Transport: tr, Timeout: stsTimeout,
		// RFC 8461 section 3.3: "HTTP 3xx redirects MUST NOT be followed".
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c
}

type stsResolverKey struct{}

// policy returns the domain's policy in force, nil for none. A failure to
// look it up or fetch it keeps a cached policy while it lasts, else means
// none (RFC 8461 section 5).
func (c *stsCache) policy(ctx context.Context, res *mxResolver, domain string) *stsPolicy {
	if c == nil {
		return nil
	}
	now := c.now()
	c.mu.Lock()
	cached := c.m[domain]
	retry := c.failed[domain]
	c.mu.Unlock()
	if cached != nil && now.After(cached.expires) {
		cached = nil
	}
	if now.Before(retry) {
		return cached
	}
	id, found, err := c.lookupID(ctx, res, domain)
	if err != nil {
		// A resolver that does not answer for _mta-sts must not cost
		// every attempt its timeout either.
		c.mu.Lock()
		c.failed[domain] = now.Add(stsRetryLookup)
		c.mu.Unlock()
		return cached
	}
	if !found || (cached != nil && cached.ID == id) {
		return cached
	}
	p, err := c.fetch(context.WithValue(ctx, stsResolverKey{}, res), domain)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed[domain] = now.Add(stsRetryFetch)
		if len(c.failed) > c.max {
			clear(c.failed)
		}
		return cached
	}
	delete(c.failed, domain)
	p.ID, p.expires = id, now.Add(p.MaxAge)
	if _, ok := c.m[domain]; !ok && len(c.m) >= c.max {
		c.makeRoom(now)
	}
	c.m[domain] = p
	return p
}

// makeRoom drops the expired policies, and when none had expired the one
// fetched longest ago. Called with c.mu held, when the cache is full: a
// scan of it costs less than the fetch that filled it.
func (c *stsCache) makeRoom(now time.Time) {
	var oldest string
	var at time.Time
	for d, p := range c.m {
		if now.After(p.expires) {
			delete(c.m, d)
			continue
		}
		if fetched := p.expires.Add(-p.MaxAge); oldest == "" || fetched.Before(at) {
			oldest, at = d, fetched
		}
	}
	if len(c.m) >= c.max && oldest != "" {
		delete(c.m, oldest)
	}
}

// lookupID reads _mta-sts.DOMAIN's TXT record: found is false without
// exactly one STSv1 record.
func (c *stsCache) lookupID(ctx context.Context, res *mxResolver, domain string) (id string, found bool, err error) {
	rrs, _, err := res.lookup(ctx, "_mta-sts."+domain, dns.TypeTXT)
	if err != nil {
		return "", false, err
	}
	n := 0
	for _, rr := range rrs {
		txt, ok := rr.(*dns.TXT)
		if !ok {
			continue
		}
		v := strings.Join(txt.Txt, "")
		if !strings.HasPrefix(v, "v=STSv1") {
			continue
		}
		n++
		for _, f := range strings.Split(v, ";") {
			if k, val, ok := strings.Cut(strings.TrimSpace(f), "="); ok && k == "id" {
				id = val
			}
		}
	}
	return id, n == 1 && id != "", nil
}

// fetch gets and parses the policy file.
func (c *stsCache) fetch(ctx context.Context, domain string) (*stsPolicy, error) {
	host := "mta-sts." + domain
	if c.port != "443" {
		host = net.JoinHostPort(host, c.port)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/.well-known/mta-sts.txt", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("mta-sts policy of %s: HTTP %d", domain, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, stsMaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > stsMaxBody {
		return nil, fmt.Errorf("mta-sts policy of %s: larger than %d bytes", domain, stsMaxBody)
	}
	return parseSTSPolicy(domain, string(body))
}

// parseSTSPolicy reads a policy file (RFC 8461 section 3.2).
func parseSTSPolicy(domain, text string) (*stsPolicy, error) {
	p := &stsPolicy{Domain: domain}
	version := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "version":
			version = v
		case "mode":
			p.Mode = v
		case "mx":
			p.MX = append(p.MX, v)
		case "max_age":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("mta-sts policy of %s: max_age %q", domain, v)
			}
			p.MaxAge = min(time.Duration(n)*time.Second, stsMaxMaxAge)
		}
	}
	if version != "STSv1" {
		return nil, fmt.Errorf("mta-sts policy of %s: version %q", domain, version)
	}
	switch p.Mode {
	case STSEnforce, STSTesting:
		if len(p.MX) == 0 {
			return nil, fmt.Errorf("mta-sts policy of %s: no mx", domain)
		}
	case STSNone:
	default:
		return nil, fmt.Errorf("mta-sts policy of %s: mode %q", domain, p.Mode)
	}
	if p.MaxAge == 0 && !strings.Contains(text, "max_age") {
		return nil, fmt.Errorf("mta-sts policy of %s: no max_age", domain)
	}
	return p, nil
}
