package inbound

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// cappedListener bounds the connections open at once, in all and per
// client address: one past either bound is greeted with 421 and closed
// before any session starts, so it holds no memory of ours.
type cappedListener struct {
	net.Listener
	max, perIP int
	logger     *slog.Logger

	mu    sync.Mutex
	total int
	byIP  map[string]int
}

func newCappedListener(l net.Listener, max, perIP int, logger *slog.Logger) *cappedListener {
	return &cappedListener{Listener: l, max: max, perIP: perIP, logger: logger, byIP: map[string]int{}}
}

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := hostOf(c.RemoteAddr())
		l.mu.Lock()
		ok := l.total < l.max && l.byIP[ip] < l.perIP
		if ok {
			l.total++
			l.byIP[ip]++
		}
		l.mu.Unlock()
		if ok {
			return &countedConn{Conn: c, l: l, ip: ip}, nil
		}
		go refuse(c)
	}
}

func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte("421 4.7.0 Too many connections; try again later\r\n"))
	_ = c.Close()
}

func hostOf(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return a.String()
}

type countedConn struct {
	net.Conn
	l    *cappedListener
	ip   string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.total--
		if c.l.byIP[c.ip]--; c.l.byIP[c.ip] <= 0 {
			delete(c.l.byIP, c.ip)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
