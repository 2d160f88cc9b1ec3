package submission

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener bounds the connections open at once: past max, a new
// connection is told 421 and closed before go-smtp sees it, so that idle
// clients that never say EHLO count too and no goroutine waits on them.
type limitListener struct {
	net.Listener
	open   *atomic.Int64
	max    int64
	reject func()
	// session bounds a whole connection and auth the time to a
	// successful AUTH, both from accept: a client that never says EHLO,
	// or never authenticates, cannot keep its slot by sending NOOPs
	// (each of which resets only the command timeout).
	session, auth time.Duration
}

var tooManyReply = []byte("421 4.7.0 too many SMTP sessions open; try again later\r\n")

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.reject()
			go func() {
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = c.Write(tooManyReply)
				_ = c.Close()
			}()
			continue
		}
		cc := &countedConn{Conn: c, open: l.open}
		// Under the lock: a deadline that fires must find both timers set.
		cc.mu.Lock()
		cc.session = time.AfterFunc(l.session, func() { _ = cc.Close() })
		cc.auth = time.AfterFunc(l.auth, func() { _ = cc.Close() })
		cc.mu.Unlock()
		return cc, nil
	}
}

// countedConn gives its slot back once, when it is closed, and is closed
// by its deadlines.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once

	mu            sync.Mutex
	session, auth *time.Timer
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.open.Add(-1)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.session.Stop()
		c.auth.Stop()
	})
	return c.Conn.Close()
}

// authenticated lifts the deadline to AUTH of the connection under conn
// (a TLS connection's too); the session's deadline stays.
func authenticated(conn net.Conn) {
	if t, ok := conn.(*tls.Conn); ok {
		conn = t.NetConn()
	}
	if c, ok := conn.(*countedConn); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.auth.Stop()
	}
}
