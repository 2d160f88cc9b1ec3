package main

// Mode smtp is the SMTP load client of bench/compare.sh's postfix section:
// the same client, the same messages and the same sessions against
// sendonce's SMTP submission listener and against a Postfix smtpd, so that
// the two accept rates differ only by the server.
//
//	sendonce-bench --mode smtp --smtp-addr 127.0.0.1:2525 --key so_… --messages 20000 --sessions 20

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// smtpLoad is what one run of the SMTP load client does.
type smtpLoad struct {
	addr string
	// key, when set, is sent as the AUTH PLAIN password (sendonce takes an
	// API key with scope send); empty: no AUTH (a Postfix that relays for
	// its mynetworks).
	key      string
	sessions int
	messages int
	size     int // bytes of each message, headers included (about)
	from, to string
	// timeout bounds each dial, command and the reply after the final dot,
	// so that a stuck server ends the run instead of hanging it.
	timeout time.Duration
}

// define registers the mode's flags (--key is the tool's own).
func (l *smtpLoad) define(fs *flag.FlagSet) {
	fs.StringVar(&l.addr, "smtp-addr", "", "smtp: the SMTP server (HOST:PORT) to send to")
	fs.IntVar(&l.sessions, "sessions", 20, "smtp: sessions kept open at once, each sending its share of --messages")
	fs.IntVar(&l.messages, "messages", 20000, "smtp: messages to send in all, one recipient each")
	fs.IntVar(&l.size, "msg-size", 1536, "smtp: approximate size of each message in bytes")
	fs.StringVar(&l.from, "smtp-from", "bench@example.com", "smtp: MAIL FROM and From:")
	fs.StringVar(&l.to, "smtp-to", "sink@example.net", "smtp: RCPT TO and To:")
	fs.DurationVar(&l.timeout, "smtp-timeout", time.Minute, "smtp: bound on each dial, command and final reply")
}

// smtpResult is one run's figures.
type smtpResult struct {
	sent, errors int
	dials        int
	elapsed      time.Duration
	p50, p99     time.Duration // of one transaction, MAIL to the reply after the dot
	firstError   string
}

func (r *smtpResult) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.sent) / r.elapsed.Seconds()
}

// smtpMode runs the load, prints a human line and a RESULT line for
// scripts, and fails when any message was not accepted: a rate that
// counts refusals would flatter the server.
func smtpMode(ctx context.Context, l smtpLoad, stdout io.Writer) error {
	if l.addr == "" || l.sessions < 1 || l.messages < 1 || l.size < 1 || l.timeout <= 0 {
		return errors.New("--mode smtp needs --smtp-addr, and positive --sessions, --messages, --msg-size and --smtp-timeout")
	}
	r, err := runSMTPLoad(ctx, l)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "smtp %s: %d of %d messages accepted in %.2f s over %d sessions (%d connections): %.0f msgs/s, p50 %s, p99 %s, %d errors\n",
		l.addr, r.sent, l.messages, r.elapsed.Seconds(), l.sessions, r.dials, r.perSecond(), ms(r.p50), ms(r.p99), r.errors)
	fmt.Fprintf(stdout, "RESULT msgs=%d errors=%d secs=%.3f msgs_per_s=%.1f p50_ms=%.2f p99_ms=%.2f connections=%d\n",
		r.sent, r.errors, r.elapsed.Seconds(), r.perSecond(),
		float64(r.p50)/float64(time.Millisecond), float64(r.p99)/float64(time.Millisecond), r.dials)
	if r.errors > 0 {
		return fmt.Errorf("%d of %d messages not accepted (first: %s)", r.errors, l.messages, r.firstError)
	}
	return nil
}

// smtpTally gathers the sessions' outcomes.
type smtpTally struct {
	mu         sync.Mutex
	took       []time.Duration
	errors     int
	dials      int
	firstError string
}

func (t *smtpTally) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.errors == 0 {
		t.firstError = err.Error()
	}
	t.errors++
}

// runSMTPLoad sends l.messages over l.sessions sessions. Each message
// takes a number from one counter, so the total is exact whatever the
// sessions' speeds; a message whose dial failed counts as an error, which
// bounds the run by the count even against a server that is gone.
//
// The sessions are opened one after another before the clock starts: the
// figure is messages over open sessions, and sendonce lets one address
// hold only a few connections that have not authenticated yet, so twenty
// dialled at once would be refused 421 in part.
func runSMTPLoad(ctx context.Context, l smtpLoad) (*smtpResult, error) {
	run := make([]byte, 6)
	if _, err := rand.Read(run); err != nil {
		return nil, err
	}
	runID := hex.EncodeToString(run)
	var (
		next  atomic.Int64
		tally smtpTally
		wg    sync.WaitGroup
	)
	clients := make([]*smtp.Client, l.sessions)
	for i := range clients {
		c, err := l.dial()
		if err != nil {
			for _, c := range clients[:i] {
				_ = c.Close()
			}
			return nil, fmt.Errorf("opening session %d of %d: %w", i+1, l.sessions, err)
		}
		clients[i] = c
	}
	tally.dials = l.sessions
	start := time.Now()
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.session(ctx, c, runID, &next, &tally)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &smtpResult{elapsed: time.Since(start), sent: len(tally.took), errors: tally.errors,
		dials: tally.dials, firstError: tally.firstError}
	slices.Sort(tally.took)
	if n := len(tally.took); n > 0 {
		r.p50, r.p99 = tally.took[n/2], tally.took[min(n-1, n*99/100)]
	}
	return r, nil
}

// session is one client connection, c, sending messages until the
// counter passes l.messages. It dials again only after a failure that left
// no usable connection.
func (l smtpLoad) session(ctx context.Context, c *smtp.Client, runID string, next *atomic.Int64, tally *smtpTally) {
	defer func() {
		if c != nil {
			_ = c.Quit()
			_ = c.Close()
		}
	}()
	var took []time.Duration
	defer func() {
		tally.mu.Lock()
		tally.took = append(tally.took, took...)
		tally.mu.Unlock()
	}()
	for ctx.Err() == nil {
		seq := next.Add(1)
		if seq > int64(l.messages) {
			return
		}
		if c == nil {
			var err error
			if c, err = l.dial(); err != nil {
				tally.fail(err)
				continue
			}
			tally.mu.Lock()
			tally.dials++
			tally.mu.Unlock()
		}
		t0 := time.Now()
		err := l.send(c, l.message(runID, seq))
		if err == nil {
			took = append(took, time.Since(t0))
			continue
		}
		tally.fail(err)
		// A refusal leaves the session usable once reset; anything else
		// (a timeout, a dropped connection) does not.
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code == 421 || c.Reset() != nil {
			_ = c.Close()
			c = nil
		}
	}
}

// dial opens a session: greeting, EHLO, and AUTH PLAIN when l.key is set.
func (l smtpLoad) dial() (*smtp.Client, error) {
	conn, err := net.DialTimeout("tcp", l.addr, l.timeout)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c := smtp.NewClient(conn)
	c.CommandTimeout, c.SubmissionTimeout = l.timeout, l.timeout
	if err := c.Hello("bench.localhost"); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("EHLO: %w", err)
	}
	if l.key != "" {
		if err := c.Auth(sasl.NewPlainClient("", "bench", l.key)); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("AUTH PLAIN: %w", err)
		}
	}
	return c, nil
}

// send is one transaction: MAIL, RCPT, DATA. After a 250 the next MAIL
// follows on the same session without RSET (RFC 5321 §3.3 allows it);
// RSET is sent only after a refusal.
func (l smtpLoad) send(c *smtp.Client, msg []byte) error {
	if err := c.Mail(l.from, nil); err != nil {
		return fmt.Errorf("MAIL: %w", err)
	}
	if err := c.Rcpt(l.to, nil); err != nil {
		return fmt.Errorf("RCPT: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		_ = w.Close()
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	return nil
}

// message is message seq of the run: a plain-text mail of about l.size
// bytes whose Message-ID is new in every run, so that sendonce (which
// takes it as the idempotency key) accepts each one as a new send.
func (l smtpLoad) message(runID string, seq int64) []byte {
	var b strings.Builder
	b.Grow(l.size + 80)
	fmt.Fprintf(&b, "From: <%s>\r\nTo: <%s>\r\nSubject: bench %d\r\n", l.from, l.to, seq)
	fmt.Fprintf(&b, "Date: %s\r\nMessage-ID: <bench-%s-%d@bench.localhost>\r\n", time.Now().UTC().Format(time.RFC1123Z), runID, seq)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n")
	const line = "The quick brown fox jumps over the lazy dog, again and again and again.\r\n"
	for b.Len()+len(line) <= l.size {
		b.WriteString(line)
	}
	if pad := l.size - b.Len() - 2; pad > 0 {
		b.WriteString(strings.Repeat("x", pad) + "\r\n")
	}
	return []byte(b.String())
}
