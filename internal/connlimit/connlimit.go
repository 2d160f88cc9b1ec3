// Package connlimit bounds the connections strangers may hold open on an
// SMTP listener: in all, per client, and in time. Both SMTP doors (the
// inbound listener and submission) use it, each with its own settings.
//
//   - Past Max, a newcomer either ends the session idle the longest (Evict:
//     held-open sessions cannot keep new senders out) or is refused.
//   - Past PerClient, a newcomer from that client is refused; a client is
//     an IPv4 address or an IPv6 /64 (one host is given a whole /64). A
//     connection stops counting for its client once Released (submission:
//     after AUTH, as an application opens many sessions from one host).
//   - Refused connections are told Refusal's line and closed before any
//     session starts, so they hold no memory or goroutine of the server.
//   - Each session ends at its absolute deadline (Session), at
//     ReleaseWithin after accept unless Released, and after
//     MaxIdleCommands commands outside a transaction since its last
//     message.
//
// A session is ended by moving its read deadline into the past: go-smtp's
// read then fails as a timeout and go-smtp answers 421 4.4.2 and closes
// the connection itself, in TLS too, without a write of ours racing its
// own.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Reason is why a connection was refused.
type Reason int

const (
	// Full: Max connections are open (and none could be evicted).
	Full Reason = iota
	// ClientFull: the client has PerClient connections counted.
	ClientFull
)

// Config sets a Limiter's bounds. Zero values of the durations and of
// MaxIdleCommands mean no bound; Max and PerClient must be positive.
type Config struct {
	Max, PerClient  int
	Session         time.Duration
	ReleaseWithin   time.Duration
	MaxIdleCommands int
	Evict           bool
	// Refusal is the reply line (CRLF-terminated) a refused connection
	// gets.
	Refusal func(Reason) []byte
	// OnRefuse and OnEvict, when set, are told of each refusal and
	// eviction (metrics, the log).
	OnRefuse func(Reason)
	OnEvict  func(client string)
}

// Limiter counts the connections of every listener it wraps against one
// set of bounds.
type Limiter struct {
	cfg Config

	mu       sync.Mutex
	total    int
	byClient map[string]int
	open     map[*Conn]struct{}
	// tick orders activity: a logical clock, so "idle the longest" does
	// not depend on the resolution of the wall clock.
	tick atomic.Int64
}

// New returns a Limiter with cfg's bounds.
func New(cfg Config) *Limiter {
	return &Limiter{cfg: cfg, byClient: map[string]int{}, open: map[*Conn]struct{}{}}
}

// Listen wraps ln so that its connections count against l.
func (l *Limiter) Listen(ln net.Listener) net.Listener { return &listener{Listener: ln, l: l} }

type listener struct {
	net.Listener
	l *Limiter
}

func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if cc, ok := ln.l.admit(c); ok {
			return cc, nil
		}
	}
}

// admit counts c in, evicting the idlest session if it must and may, or
// refuses it.
func (l *Limiter) admit(c net.Conn) (*Conn, bool) {
	cc := &Conn{Conn: c, l: l, client: ClientKey(c.RemoteAddr())}
	if l.cfg.Session > 0 {
		cc.deadline = time.Now().Add(l.cfg.Session)
	}
	cc.lastActive.Store(l.tick.Add(1))
	var evicted *Conn
	reason := Full
	l.mu.Lock()
	ok := l.byClient[cc.client] < l.cfg.PerClient
	if !ok {
		reason = ClientFull
	}
	if ok && l.total >= l.cfg.Max {
		if l.cfg.Evict {
			evicted = l.idlest()
		}
		if ok = evicted != nil; ok {
			l.uncount(evicted)
		}
	}
	if ok {
		l.total++
		l.byClient[cc.client]++
		l.open[cc] = struct{}{}
		cc.counted, cc.perClient = true, true
	}
	l.mu.Unlock()
	if evicted != nil {
		if l.cfg.OnEvict != nil {
			l.cfg.OnEvict(evicted.client)
		}
		evicted.Expire()
	}
	if !ok {
		if l.cfg.OnRefuse != nil {
			l.cfg.OnRefuse(reason)
		}
		go refuse(c, l.cfg.Refusal(reason))
		return nil, false
	}
	if l.cfg.ReleaseWithin > 0 {
		cc.releaseTimer = time.AfterFunc(l.cfg.ReleaseWithin, func() {
			if !cc.released.Load() {
				cc.Expire()
			}
		})
	}
	return cc, true
}

// idlest is the open session whose last activity is the oldest; l.mu held.
func (l *Limiter) idlest() *Conn {
	var best *Conn
	for c := range l.open {
		if best == nil || c.lastActive.Load() < best.lastActive.Load() {
			best = c
		}
	}
	return best
}

// uncount stops counting c (once); l.mu held.
func (l *Limiter) uncount(c *Conn) {
	if !c.counted {
		return
	}
	c.counted = false
	delete(l.open, c)
	l.total--
	l.uncountClient(c)
}

// uncountClient stops counting c for its client (once); l.mu held.
func (l *Limiter) uncountClient(c *Conn) {
	if !c.perClient {
		return
	}
	c.perClient = false
	if l.byClient[c.client]--; l.byClient[c.client] <= 0 {
		delete(l.byClient, c.client)
	}
}

func refuse(c net.Conn, line []byte) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write(line)
	_ = c.Close()
}

// ClientKey is what the per-client bound counts: the IPv4 address, or the
// /64 of an IPv6 one (a host may use any address of its /64).
func ClientKey(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if v4 := tcp.IP.To4(); v4 != nil {
		return v4.String()
	}
	if len(tcp.IP) == net.IPv6len {
		return tcp.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return tcp.IP.String()
}
