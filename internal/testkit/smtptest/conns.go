package smtptest

import (
	"net"
	"sync"
	"time"
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
	for max := l.s.opts.MaxConns; max > 0; {
		l.s.mu.Lock()
		full := len(l.s.open) >= max
		if full {
			l.s.refused++
		}
		l.s.mu.Unlock()
		if !full {
			break
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte("421 4.7.0 Too many concurrent SMTP connections\r\n"))
		c.Close()
		if c, err = l.Listener.Accept(); err != nil {
			return nil, err
		}
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
