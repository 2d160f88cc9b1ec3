package imapsync

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// go-imap's client reads whatever a server sends into memory as it comes:
// an atom or a quoted string as long as the line, a literal that is not a
// message body ({N} in a LIST or an ENVELOPE) whole, and it offers no hook
// to refuse either. guardConn sits under the client, on the plain text,
// and follows the response framing: a line (outside literals) longer than
// maxLine, or a literal announced larger than maxLiteral, ends the
// connection instead of reaching the decoder. Literal contents pass
// unscanned: a message body's lines are its own business.

// ClassLimit: the server sent more than the limits allow (an overlong
// line or literal, a search naming more messages than the folder holds,
// endless lists) or data the client cannot make sense of.
const ClassLimit = "server_limit"

// Default bounds of what a server may send.
const (
	// DefaultMaxLineBytes bounds a response line outside literals. A
	// SEARCH answer of a server without ESEARCH is the longest legitimate
	// one: about 7 bytes a message.
	DefaultMaxLineBytes = 4 << 20
	// literalSlack is allowed beyond the message size limit for a body
	// literal: servers count RFC822.SIZE and BODY[] slightly differently.
	literalSlack = 1 << 20
	// maxListed bounds the folders a LIST may name.
	maxListed = 1000
)

// errOverLimit is wrapped by every refusal of the guard.
var errOverLimit = errors.New("the server sent more than the limits allow")

type guardConn struct {
	net.Conn
	maxLine, maxLiteral int64

	mu   sync.Mutex // guards err and pass
	err  error
	pass time.Time // the pass's deadline (zero: none)
	read time.Time // the client's own read deadline

	line int64    // bytes of the current line so far
	lit  int64    // bytes of the current literal still to come
	tail [24]byte // the current line's last bytes, to find "{N}" before CRLF
	nt   int
}

func newGuard(c net.Conn, maxLine, maxLiteral int64) *guardConn {
	return &guardConn{Conn: c, maxLine: maxLine, maxLiteral: maxLiteral}
}

// Err is why the guard ended the connection, if it did.
func (g *guardConn) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// go-imap sets a read deadline of its own before each response (30 s,
// 5 minutes for a literal, none while idle), which would replace a
// deadline set beneath it: the guard keeps the earlier of the two, so a
// server answering a byte every 29 s cannot stretch a pass.

// SetPassDeadline bounds every read until it is set again (zero: no
// bound of the pass's).
func (g *guardConn) SetPassDeadline(t time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pass = t
	return g.Conn.SetReadDeadline(earlier(g.read, g.pass))
}

func (g *guardConn) SetReadDeadline(t time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.read = t
	return g.Conn.SetReadDeadline(earlier(g.read, g.pass))
}

func (g *guardConn) SetDeadline(t time.Time) error {
	if err := g.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return g.SetReadDeadline(t)
}

// earlier is the earlier of two deadlines, zero meaning none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Read is called by the client's one reading goroutine: the framing
// state is its own; only the verdict is shared (Err).
func (g *guardConn) Read(p []byte) (int, error) {
	if err := g.Err(); err != nil {
		return 0, err
	}
	n, err := g.Conn.Read(p)
	if serr := g.scan(p[:n]); serr != nil {
		g.mu.Lock()
		g.err = serr
		g.mu.Unlock()
		_ = g.Conn.Close()
		return 0, serr
	}
	return n, err
}

// scan follows the framing through b.
func (g *guardConn) scan(b []byte) error {
	for len(b) > 0 {
		if g.lit > 0 {
			k := min(g.lit, int64(len(b)))
			g.lit -= k
			b = b[k:]
			continue
		}
		c := b[0]
		b = b[1:]
		if c == '\n' {
			size, ok, err := g.literalAnnounced()
			if err != nil {
				return err
			}
			if ok {
				g.lit = size
			}
			g.line, g.nt = 0, 0
			continue
		}
		g.line++
		if g.line > g.maxLine {
			return fmt.Errorf("%w: a line longer than %d bytes", errOverLimit, g.maxLine)
		}
		if g.nt == len(g.tail) {
			copy(g.tail[:], g.tail[1:])
			g.nt--
		}
		g.tail[g.nt] = c
		g.nt++
	}
	return nil
}

// literalAnnounced reads "{N}\r" (or "{N+}\r") at the end of the line
// just ended: a literal of N bytes follows.
func (g *guardConn) literalAnnounced() (int64, bool, error) {
	t := g.tail[:g.nt]
	if len(t) < 4 || t[len(t)-1] != '\r' || t[len(t)-2] != '}' {
		return 0, false, nil
	}
	t = t[:len(t)-2]
	if len(t) > 0 && t[len(t)-1] == '+' {
		t = t[:len(t)-1]
	}
	var (
		size   int64
		digits int
	)
	for i := len(t) - 1; i >= 0; i-- {
		if t[i] == '{' {
			if digits == 0 {
				return 0, false, nil
			}
			if size > g.maxLiteral {
				return 0, false, fmt.Errorf("%w: a literal of %d bytes", errOverLimit, size)
			}
			return size, true, nil
		}
		if t[i] < '0' || t[i] > '9' {
			return 0, false, nil
		}
		if digits == 18 {
			return 0, false, fmt.Errorf("%w: a literal of more than 18 digits", errOverLimit)
		}
		size += int64(t[i]-'0') * pow10(digits)
		digits++
	}
	return 0, false, nil
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// greeted puts a greeting in front of c's data: after a STARTTLS done
// here, the client reads the server's first words over TLS as it would on
// a fresh connection (and asks for capabilities again, as it must).
type greeted struct {
	net.Conn
	r io.Reader
}

func (g *greeted) Read(p []byte) (int, error) { return g.r.Read(p) }

func withGreeting(c net.Conn) net.Conn {
	return &greeted{Conn: c, r: io.MultiReader(strings.NewReader("* OK TLS is on\r\n"), c)}
}

// overLimit is err, told as server_limit when the guard ended the
// connection: the client's own error then only says it was closed.
func overLimit(g *guardConn, err error) error {
	if gerr := g.Err(); gerr != nil {
		return classed(ClassLimit, gerr)
	}
	return err
}
