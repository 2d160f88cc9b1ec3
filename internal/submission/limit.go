package submission

import (
	"crypto/tls"
	"fmt"
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
	// unauth counts the connections of each client address that have not
	// authenticated yet; past perIP a new one from that address is
	// refused. Authenticated sessions do not count: an application opens
	// many from one host, a stranger holds slots without credentials.
	unauth *unauthCount
	perIP  int
}

// unauthCount is shared by a server's listeners.
type unauthCount struct {
	mu   sync.Mutex
	byIP map[string]int
}

// take counts a new unauthenticated connection of ip unless it has max.
func (u *unauthCount) take(ip string, max int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byIP[ip] >= max {
		return false
	}
	u.byIP[ip]++
	return true
}

func (u *unauthCount) give(ip string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byIP[ip]--; u.byIP[ip] <= 0 {
		delete(u.byIP, ip)
	}
}

// The two refusals say which limit the client met.
var (
	tooManyReply      = []byte("421 4.7.0 too many SMTP sessions open on this server (--smtp-max-sessions); try again later\r\n")
	tooManyFromClient = "421 4.7.0 too many connections from your address that have not authenticated yet (limit %d, --smtp-max-unauthenticated-per-ip); try again later\r\n"
)

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		var refusal []byte
		switch {
		case l.open.Add(1) > l.max:
			refusal = tooManyReply
		case !l.unauth.take(ip, l.perIP):
			refusal = fmt.Appendf(nil, tooManyFromClient, l.perIP)
		}
		if refusal != nil {
			l.open.Add(-1)
			l.reject()
			go func() {
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = c.Write(refusal)
				_ = c.Close()
			}()
			continue
		}
		cc := &countedConn{Conn: c, open: l.open, unauth: l.unauth, ip: ip}
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

	unauth *unauthCount
	ip     string

	mu            sync.Mutex
	session, auth *time.Timer
	authed        bool
}

func clientIP(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return a.String()
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.open.Add(-1)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.session.Stop()
		c.auth.Stop()
		if !c.authed {
			c.unauth.give(c.ip)
		}
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
		if !c.authed {
			c.authed = true
			c.unauth.give(c.ip)
		}
	}
}
