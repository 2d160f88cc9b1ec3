// Package tcpproxy is a TCP proxy on 127.0.0.1 for fault tests and the
// soak (cmd/sendonce-bench): it sits between sendonce and a server it
// depends on — PostgreSQL, an SMTP relay — and cuts connections, or drops
// an SMTP server's reply to the end of a message's data. It needs no
// *testing.T, so tools can use it too.
package tcpproxy

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy passes bytes both ways until told to fault:
//
//   - Cut closes every open connection and refuses new ones until Pass;
//   - DropReplies (SMTP only) forwards a message's final dot to the server
//     and then swallows the server's reply and closes the connection: the
//     server took the message, the client never hears so.
type Proxy struct {
	// Addr is the proxy's "127.0.0.1:port".
	Addr   string
	target string
	ln     net.Listener
	done   chan struct{}

	cutting atomic.Bool
	// dropP is the chance, in 1/1000, that a message's reply is dropped.
	dropP   atomic.Int32
	chance  func(perMille int32) bool
	dropped atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// proxyDialTimeout bounds the proxy's connect to its target; proxyLinger is
// how long a muted connection stays open after the dot, so that the
// target's reply arrives and is swallowed before the close.
const (
	proxyDialTimeout = 5 * time.Second
	proxyLinger      = 300 * time.Millisecond
)

// Start listens on 127.0.0.1:0 and forwards to target. chance decides each
// DropReplies draw (nil: every message's reply is dropped while DropReplies
// is on).
func Start(target string, chance func(perMille int32) bool) (*Proxy, error) {
	if chance == nil {
		chance = func(int32) bool { return true }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, done: make(chan struct{}),
		chance: chance, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	defer close(p.done)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cutting.Load() {
			c.Close()
			continue
		}
		go p.handle(c)
	}
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		client.Close()
		server.Close()
		p.track(client, false)
		p.track(server, false)
	}()
	var muted atomic.Bool
	up := make(chan struct{})
	go func() {
		defer close(up)
		p.upstream(client, server, &muted)
	}()
	// Downstream: the target's replies, unless muted.
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !muted.Load() {
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	<-up
}

// upstream copies client → server, watching for the end of a message's
// data ("\r\n.\r\n": a line that is a lone dot, which dot-stuffing keeps
// out of the body). When a draw says drop, the connection is muted before
// the dot goes out, so the reply can never slip through, and closed a
// moment later.
func (p *Proxy) upstream(client, server net.Conn, muted *atomic.Bool) {
	defer server.Close()
	buf := make([]byte, 32<<10)
	var tail []byte // the last bytes of the previous read
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if perMille := p.dropP.Load(); perMille > 0 && !muted.Load() {
				window := append(tail, buf[:n]...)
				if bytes.Contains(window, []byte("\r\n.\r\n")) && p.chance(perMille) {
					muted.Store(true)
					p.dropped.Add(1)
					time.AfterFunc(proxyLinger, func() { client.Close(); server.Close() })
				}
				tail = append(tail[:0], window[max(0, len(window)-4):]...)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: the session is over
		}
	}
}

// Cut closes every open connection and refuses new ones until pass.
func (p *Proxy) Cut() {
	p.cutting.Store(true)
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Pass ends a cut and stops dropping replies.
func (p *Proxy) Pass() {
	p.cutting.Store(false)
	p.dropP.Store(0)
}

// DropReplies drops each message's reply with this chance (1/1000).
func (p *Proxy) DropReplies(perMille int32) { p.dropP.Store(perMille) }

// Dropped is how many replies DropReplies swallowed.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	<-p.done
	p.Cut()
}
