package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is one session's connection: it keeps its Limiter's counts and the
// session's bounds.
type Conn struct {
	net.Conn
	l        *Limiter
	client   string
	deadline time.Time // zero: none
	// counted and perClient are guarded by l.mu.
	counted, perClient bool
	releaseTimer       *time.Timer

	// dl orders the deadline go-smtp sets with Expire's, so an eviction
	// is never overwritten by a deadline set at the same moment.
	dl sync.Mutex

	lastActive atomic.Int64 // l.tick at the last command or bytes read
	inTx       atomic.Bool  // between MAIL FROM and the end of DATA or RSET
	idleCmds   atomic.Int32 // commands outside a transaction since the last message
	expired    atomic.Bool
	released   atomic.Bool
}

func (c *Conn) Read(p []byte) (int, error) {
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
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.dl.Lock()
	defer c.dl.Unlock()
	if max := c.l.cfg.MaxIdleCommands; max > 0 && !c.inTx.Load() && int(c.idleCmds.Add(1)) > max {
		c.expired.Store(true)
	}
	if c.expired.Load() {
		return c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
	if !c.deadline.IsZero() && (t.IsZero() || t.After(c.deadline)) {
		t = c.deadline
	}
	return c.Conn.SetReadDeadline(t)
}

// Expire ends the session: its next or current read fails at once.
func (c *Conn) Expire() {
	c.dl.Lock()
	defer c.dl.Unlock()
	c.expired.Store(true)
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
}

// Transaction marks a transaction open (MAIL FROM) or ended.
func (c *Conn) Transaction(open bool) { c.inTx.Store(open) }

// Delivered starts the command budget afresh: a message came.
func (c *Conn) Delivered() { c.idleCmds.Store(0) }

// Release stops counting the connection for its client and lifts the
// ReleaseWithin deadline (submission: the client authenticated). The
// session's own deadline stays.
func (c *Conn) Release() {
	if c.released.Swap(true) {
		return
	}
	if c.releaseTimer != nil {
		c.releaseTimer.Stop()
	}
	c.l.mu.Lock()
	c.l.uncountClient(c)
	c.l.mu.Unlock()
}

func (c *Conn) Close() error {
	if c.releaseTimer != nil {
		c.releaseTimer.Stop()
	}
	c.l.mu.Lock()
	c.l.uncount(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// Of is the Conn under a session's connection (TLS or not); nil when the
// listener was not wrapped by a Limiter.
func Of(c net.Conn) *Conn {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	cc, _ := c.(*Conn)
	return cc
}
