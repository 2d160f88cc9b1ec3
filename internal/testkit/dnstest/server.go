package dnstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Bounds that keep a broken test from hanging.
const (
	listenTries     = 20              // attempts to find a port free for both UDP and TCP
	startTimeout    = 5 * time.Second // how long Start waits for both listeners
	shutdownTimeout = 5 * time.Second
	ioTimeout       = 5 * time.Second // server read/write deadline
	maxCNAMEChase   = 8               // CNAME hops followed in one answer
	lookupTimeout   = 5 * time.Second // LookupTXT's query timeout
)

// Options configures StartWithOptions.
type Options struct {
	// Records is the zone: resource records in zone-file syntax, one per
	// string, as github.com/miekg/dns's NewRR parses them, for example
	// "example.test. 300 IN MX 10 mx.example.test.". Names must be fully
	// qualified; the TTL and class may be left out.
	Records []string
	// ZoneFile, when set, is read as a master file (RFC 1035 section 5,
	// $ORIGIN and $TTL allowed) and its records are added to Records.
	ZoneFile string
	// TruncateUDP answers every UDP query with an empty reply that has the
	// TC bit set, so a client gets answers only by retrying over TCP.
	TruncateUDP bool
	// NoCNAMEChase answers a query for a name that has a CNAME with the
	// CNAME record only, as a server that does not know the target would:
	// the client must query the target itself.
	NoCNAMEChase bool
	// ServFail lists names (with or without the final dot) answered with
	// SERVFAIL whatever the type asked.
	ServFail []string
	// Secure lists names (with or without the final dot) whose answers
	// carry the AD bit, as a validating resolver sets it for data DNSSEC
	// vouched for; every other answer has it clear.
	Secure []string
}

// Query is one question the server received.
type Query struct {
	Name string // fully qualified, lower case
	Type string // "TXT", "MX", ...
	Net  string // "udp" or "tcp"
}

// Server is a running DNS server on 127.0.0.1.
type Server struct {
	addr string
	opts Options

	records  map[string][]dns.RR // by lower-case owner name
	names    map[string]bool     // owner names and their ancestors (empty non-terminals)
	servFail map[string]bool
	secure   map[string]bool

	mu      sync.Mutex
	queries []Query

	// zone guards records and names, which Publish changes while the
	// server answers.
	zone sync.RWMutex
}

// Publish adds a record (zone-file syntax, as in Options.Records) to the
// running server: a test publishes a record the code under test asked
// for, as an operator would. A record that does not parse fails the test.
func (s *Server) Publish(t testing.TB, record string) {
	t.Helper()
	rr, err := dns.NewRR(record)
	if err != nil || rr == nil {
		t.Fatalf("dnstest: record %q: %v", record, err)
	}
	s.zone.Lock()
	defer s.zone.Unlock()
	s.add(rr)
}

// Start starts a server that serves records (see Options.Records).
// t.Cleanup shuts it down.
func Start(t testing.TB, records ...string) *Server {
	t.Helper()
	return StartWithOptions(t, Options{Records: records})
}

// StartWithOptions starts a server configured by opts. A record that does
// not parse fails the test.
func StartWithOptions(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{
		opts:     opts,
		records:  make(map[string][]dns.RR),
		names:    make(map[string]bool),
		servFail: make(map[string]bool),
		secure:   make(map[string]bool),
	}
	for _, str := range opts.Records {
		rr, err := dns.NewRR(str)
		if err != nil {
			t.Fatalf("dnstest: record %q: %v", str, err)
		}
		if rr == nil {
			t.Fatalf("dnstest: record %q is empty", str)
		}
		s.add(rr)
	}
	if opts.ZoneFile != "" {
		if err := s.addZoneFile(opts.ZoneFile); err != nil {
			t.Fatalf("dnstest: %v", err)
		}
	}
	for _, name := range opts.ServFail {
		s.servFail[strings.ToLower(dns.Fqdn(name))] = true
	}
	for _, name := range opts.Secure {
		s.secure[strings.ToLower(dns.Fqdn(name))] = true
	}

	pc, ln, err := listenPair()
	if err != nil {
		t.Fatalf("dnstest: %v", err)
	}
	s.addr = pc.LocalAddr().String()

	var started sync.WaitGroup
	started.Add(2)
	udp := &dns.Server{PacketConn: pc, Handler: s.handler("udp"), NotifyStartedFunc: started.Done,
		ReadTimeout: ioTimeout, WriteTimeout: ioTimeout}
	tcp := &dns.Server{Listener: ln, Handler: s.handler("tcp"), NotifyStartedFunc: started.Done,
		ReadTimeout: ioTimeout, WriteTimeout: ioTimeout}
	served := make(chan error, 2)
	for _, srv := range []*dns.Server{udp, tcp} {
		go func() { served <- srv.ActivateAndServe() }()
	}
	ready := make(chan struct{})
	go func() { started.Wait(); close(ready) }()
	select {
	case <-ready:
	case err := <-served:
		pc.Close()
		ln.Close()
		t.Fatalf("dnstest: serve: %v", err)
	case <-time.After(startTimeout):
		pc.Close()
		ln.Close()
		t.Fatal("dnstest: server did not start")
	}

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		for _, srv := range []*dns.Server{udp, tcp} {
			if err := srv.ShutdownContext(ctx); err != nil {
				t.Errorf("dnstest: shutdown: %v", err)
			}
		}
		for range 2 {
			select {
			case <-served:
			case <-ctx.Done():
				t.Errorf("dnstest: server did not stop")
				return
			}
		}
	})
	return s
}

// listenPair finds a port on 127.0.0.1 free for both UDP and TCP.
func listenPair() (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range listenTries {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("listen udp: %w", err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("no port free for both UDP and TCP: %w", lastErr)
}

func (s *Server) add(rr dns.RR) {
	name := strings.ToLower(rr.Header().Name)
	rr.Header().Name = name
	s.records[name] = append(s.records[name], rr)
	for n := name; ; {
		s.names[n] = true
		i, end := dns.NextLabel(n, 0)
		if end {
			break
		}
		n = n[i:]
	}
}

func (s *Server) addZoneFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zp := dns.NewZoneParser(f, ".", path)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		s.add(rr)
	}
	if err := zp.Err(); err != nil {
		return fmt.Errorf("zone file %s: %w", path, err)
	}
	return nil
}

// Addr returns the server's address, "127.0.0.1:port", for UDP and TCP.
func (s *Server) Addr() string { return s.addr }

// Queries returns a copy of the questions received so far, in order.
func (s *Server) Queries() []Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Query(nil), s.queries...)
}

func (s *Server) handler(network string) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		resp := s.answer(req, network)
		// Write errors mean the client went away; nothing to do in a test
		// server.
		_ = w.WriteMsg(resp)
	})
}

func (s *Server) answer(req *dns.Msg, network string) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	resp.RecursionAvailable = true
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		resp.Rcode = dns.RcodeNotImplemented
		return resp
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	s.queries = append(s.queries, Query{Name: name, Type: dns.TypeToString[q.Qtype], Net: network})
	s.mu.Unlock()

	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
		resp.SetEdns0(opt.UDPSize(), false)
	}

	if network == "udp" && s.opts.TruncateUDP {
		resp.Truncated = true
		return resp
	}
	if s.servFail[name] {
		resp.Rcode = dns.RcodeServerFailure
		return resp
	}
	resp.AuthenticatedData = s.secure[name]

	s.zone.RLock()
	defer s.zone.RUnlock()
	for hop := 0; hop <= maxCNAMEChase; hop++ {
		matched := false
		var cname *dns.CNAME
		for _, rr := range s.records[name] {
			if rr.Header().Rrtype == q.Qtype || q.Qtype == dns.TypeANY {
				resp.Answer = append(resp.Answer, dns.Copy(rr))
				matched = true
			} else if c, ok := rr.(*dns.CNAME); ok {
				cname = c
			}
		}
		if matched || cname == nil {
			if !matched && !s.names[name] {
				// The name (or the end of a CNAME chain) does not exist.
				resp.Rcode = dns.RcodeNameError
			}
			break
		}
		resp.Answer = append(resp.Answer, dns.Copy(cname))
		if s.opts.NoCNAMEChase {
			break
		}
		name = strings.ToLower(cname.Target)
	}
	if network == "udp" {
		resp.Truncate(size)
	}
	return resp
}

// LookupTXT queries the server over the network for the TXT records of
// name and returns one string per record, its character-strings joined,
// following CNAMEs in the answer: the shape of net.LookupTXT, for
// github.com/emersion/go-msgauth's dkim.VerifyOptions.LookupTXT. A name
// that does not exist or has no TXT record returns an error.
func (s *Server) LookupTXT(name string) ([]string, error) {
	c := &dns.Client{Timeout: lookupTimeout}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	m.SetEdns0(dns.DefaultMsgSize, false)
	r, _, err := c.Exchange(m, s.addr)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.Exchange(m, s.addr)
	}
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, &net.DNSError{Err: dns.RcodeToString[r.Rcode], Name: name, IsNotFound: r.Rcode == dns.RcodeNameError}
	}
	var out []string
	for _, rr := range r.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(txt.Txt, ""))
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no TXT record", Name: name, IsNotFound: true}
	}
	return out, nil
}
