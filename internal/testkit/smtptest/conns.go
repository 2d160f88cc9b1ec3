package smtptest

import (
	"net"
	"sync"
)

// trackingListener counts connections and keeps the open ones, so cleanup
// can tell whether clients hung up.
type trackingListener struct {
	net.Listener
	s *Server
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, s: l.s}
	l.s.mu.Lock()
	l.s.accepted++
	l.s.open[tc] = struct{}{}
	l.s.peak = max(l.s.peak, len(l.s.open))
	l.s.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.open, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}
