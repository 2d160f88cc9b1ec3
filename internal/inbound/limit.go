package inbound

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// cappedListener bounds the connections open at once, in all and per
// client, and how long each may be held:
//
//   - one past the per-client bound is greeted with 421 and closed before
//     any session starts, so it holds no memory of ours; a client is an
//     IPv4 address or an IPv6 /64 (one host is given a whole /64);
//   - when all MaxConns are open, the session idle the longest (by its
//     last command or bytes read) is ended to make room for the newcomer,
//     so held-open sessions cannot keep new senders out;
//   - each session ends at its absolute deadline, and after
//     maxIdleCommands commands outside a transaction since its last
//     message (NOOP, RSET, HELO, VRFY, a MAIL never followed by DATA…).
//
// A session is ended by moving its read deadline into the past: go-smtp's
// read then fails as a timeout and go-smtp answers 421 4.4.2 and closes
// the connection itself, in TLS too, without a write of ours racing its
// own.
type cappedListener struct {
	net.Listener
	max, perClient  int
	sessionTimeout  time.Duration
	maxIdleCommands int
	logger          *slog.Logger

	mu       sync.Mutex
	total    int
	byClient map[string]int
	open     map[*countedConn]struct{}
	// tick orders activity: a logical clock, so "idle the longest" does
	// not depend on the resolution of the wall clock.
	tick atomic.Int64
}

func newCappedListener(l net.Listener, cfg Config) *cappedListener {
	return &cappedListener{Listener: l, max: cfg.MaxConns, perClient: cfg.MaxConnsPerIP,
		sessionTimeout: cfg.SessionTimeout, maxIdleCommands: cfg.MaxIdleCommands, logger: cfg.Logger,
		byClient: map[string]int{}, open: map[*countedConn]struct{}{}}
}

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr())
		cc := &countedConn{Conn: c, l: l, client: key, deadline: time.Now().Add(l.sessionTimeout)}
		cc.lastActive.Store(l.tick.Add(1))
		var evicted *countedConn
		l.mu.Lock()
		ok := l.byClient[key] < l.perClient
		if ok && l.total >= l.max {
			evicted = l.idlest()
			ok = evicted != nil
			if ok {
				l.uncount(evicted)
			}
		}
		if ok {
			l.total++
			l.byClient[key]++
			l.open[cc] = struct{}{}
			cc.counted = true
		}
		l.mu.Unlock()
		if evicted != nil {
			l.logger.Info("inbound session ended for a newcomer", slog.String("client", evicted.client))
			evicted.expire()
		}
		if ok {
			return cc, nil
		}
		go refuse(c)
	}
}

// idlest is the open session whose last activity is the oldest; l.mu held.
func (l *cappedListener) idlest() *countedConn {
	var best *countedConn
	for c := range l.open {
		if best == nil || c.lastActive.Load() < best.lastActive.Load() {
			best = c
		}
	}
	return best
}

// uncount stops counting c (once); l.mu held.
func (l *cappedListener) uncount(c *countedConn) {
	if !c.counted {
		return
	}
	c.counted = false
	delete(l.open, c)
	l.total--
	if l.byClient[c.client]--; l.byClient[c.client] <= 0 {
		delete(l.byClient, c.client)
	}
}

func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte("421 4.7.0 Too many connections; try again later\r\n"))
	_ = c.Close()
}

// clientKey is what the per-client bound counts: the IPv4 address, or the
// /64 of an IPv6 one (a host may use any address of its /64).
func clientKey(a net.Addr) string {
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

// countedConn is one session's connection: it keeps the listener's counts
// and the session's bounds.
type countedConn struct {
	net.Conn
	l        *cappedListener
	client   string
	deadline time.Time
	counted  bool // guarded by l.mu

	// dl orders the deadline go-smtp sets with expire's, so an eviction
	// is never overwritten by a deadline set at the same moment.
	dl sync.Mutex

	lastActive atomic.Int64 // l.tick at the last command or bytes read
	inTx       atomic.Bool  // between MAIL FROM and the end of DATA or RSET
	idleCmds   atomic.Int32 // commands outside a transaction since the last message
	expired    atomic.Bool
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastActive.Store(c.l.tick.Add(1))
	}
	return n, err
}

// SetReadDeadline is called by go-smtp before it reads each command line
// (with its per-read timeout), and only then: so each call is a command,
// counted when no transaction is open. The deadline never passes the
// session's absolute one.
func (c *countedConn) SetReadDeadline(t time.Time) error {
	c.dl.Lock()
	defer c.dl.Unlock()
	if !c.inTx.Load() && int(c.idleCmds.Add(1)) > c.l.maxIdleCommands {
		c.expired.Store(true)
	}
	if c.expired.Load() {
		return c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
	if t.IsZero() || t.After(c.deadline) {
		t = c.deadline
	}
	return c.Conn.SetReadDeadline(t)
}

// expire ends the session: its next or current read fails at once.
func (c *countedConn) expire() {
	c.dl.Lock()
	defer c.dl.Unlock()
	c.expired.Store(true)
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
}

// transaction marks a transaction open (MAIL FROM) or ended.
func (c *countedConn) transaction(open bool) { c.inTx.Store(open) }

// delivered starts the command budget afresh: a message came.
func (c *countedConn) delivered() { c.idleCmds.Store(0) }

func (c *countedConn) Close() error {
	c.l.mu.Lock()
	c.l.uncount(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// connOf is the countedConn under a session's connection (TLS or not);
// nil when the listener is not a cappedListener.
func connOf(c net.Conn) *countedConn {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	cc, _ := c.(*countedConn)
	return cc
}
