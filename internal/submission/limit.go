package submission

import (
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
		return &countedConn{Conn: c, open: l.open}, nil
	}
}

// countedConn gives its slot back once, when it is closed.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}
