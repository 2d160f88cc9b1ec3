package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/lifecycle"
	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
)

// The receiving leg of the soak: while the send clients run and the faults
// strike, senders deliver distinct messages to a receiving inbox through
// each API process's inbound listener, behind a proxy that drops the
// listener's reply to the end of the data (the lost 250 of RFC 1047), and
// deliver a message again, the same bytes, until they hear a 250. The
// check: every message a sender heard accepted is stored once, and no
// message twice.

const (
	recvInbox     = "in@recv.soak.test"
	recvFrom      = "sender@mail.soak.test"
	recvDropMille = 200 // a fifth of the replies after the data are lost
	recvSenders   = 2
	recvPause     = 20 * time.Millisecond // between one sender's messages
	recvRetry     = 200 * time.Millisecond
	recvTimeout   = 10 * time.Second // one SMTP session
)

// recvLeg is the receiving leg: a proxy per API process's listener and
// the senders' record. The listener's SPF and DMARC checks ask the soak's
// resolver (startDNS), which answers them NXDOMAIN at once, so that they
// do not wait on a resolver this machine may not have.
type recvLeg struct {
	proxies []*tcpproxy.Proxy

	mu      sync.Mutex
	next    int
	acked   map[int]bool
	tries   int
	retries int
}

// newRecvLeg gives each API process an inbound listener on a port of its
// own (kept across restarts) behind a dropping proxy.
func newRecvLeg(seed uint64, apis []*node) (*recvLeg, error) {
	rl := &recvLeg{acked: map[int]bool{}}
	for i, n := range apis {
		port, err := freePort()
		if err != nil {
			rl.close()
			return nil, err
		}
		n.args = append(n.args, "--inbound-addr", port)
		px, err := tcpproxy.Start(port, newStream(seed, fmt.Sprintf("receive proxy %d", i)).chance)
		if err != nil {
			rl.close()
			return nil, err
		}
		px.DropReplies(recvDropMille)
		rl.proxies = append(rl.proxies, px)
	}
	return rl, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("soak receive: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (rl *recvLeg) close() {
	for _, px := range rl.proxies {
		px.Close()
	}
}

// createInbox makes the receiving inbox through any API process, on a
// domain the soak's tenant adds first (a receiving address must be on one
// of the tenant's own domains).
func (rl *recvLeg) createInbox(ctx context.Context, cl *clients) error {
	domain := recvInbox[strings.LastIndexByte(recvInbox, '@')+1:]
	if _, err := cl.setUp(ctx, "/v1/domains", "soak-domain", fmt.Sprintf(`{"domain":%q,"algorithm":"ed25519"}`, domain)); err != nil {
		return err
	}
	_, err := cl.setUp(ctx, "/inboxes", "soak-inbox", fmt.Sprintf(`{"email_address":%q}`, recvInbox))
	return err
}

// run sends new messages until newCtx ends and keeps each one it started
// going until it is accepted or giveUp ends.
func (rl *recvLeg) run(newCtx, giveUp context.Context) {
	var wg sync.WaitGroup
	for s := range recvSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; newCtx.Err() == nil; i++ {
				rl.deliver(giveUp, rl.take(), s+i)
				lifecycle.Sleep(newCtx, recvPause)
			}
		}()
	}
	wg.Wait()
}

func (rl *recvLeg) take() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.next++
	return rl.next
}

// recvMessage is message n, the same bytes every time it is delivered.
func recvMessage(n int) string {
	return fmt.Sprintf("From: Sender <%s>\r\nTo: %s\r\nSubject: Soak recv %d\r\nMessage-ID: <recv-%d@mail.soak.test>\r\n"+
		"Date: Wed, 02 Dec 2026 09:00:00 +0000\r\n\r\nMessage %d of the soak's receiving leg.\r\n", recvFrom, recvInbox, n, n, n)
}

// deliver delivers message n until a 250 (through the proxies in turn) or
// until giveUp ends.
func (rl *recvLeg) deliver(giveUp context.Context, n, turn int) {
	msg := recvMessage(n)
	for try := 0; giveUp.Err() == nil; try++ {
		px := rl.proxies[(turn+try)%len(rl.proxies)]
		err := sendOne(px.Addr, msg)
		rl.mu.Lock()
		rl.tries++
		if try > 0 {
			rl.retries++
		}
		if err == nil {
			rl.acked[n] = true
		}
		rl.mu.Unlock()
		if err == nil {
			return
		}
		lifecycle.Sleep(giveUp, recvRetry)
	}
}

func sendOne(addr, msg string) error {
	conn, err := net.DialTimeout("tcp", addr, recvTimeout)
	if err != nil {
		return err
	}
	_ = conn.SetDeadline(time.Now().Add(recvTimeout))
	c := smtp.NewClient(conn)
	defer c.Close()
	return c.SendMail(recvFrom, []string{recvInbox}, strings.NewReader(msg))
}

// judge counts the stored messages by subject through the API: every
// message a sender heard accepted is stored once, none twice.
func (rl *recvLeg) judge(ctx context.Context, api *soakAPI, rep *soakReport, logger *slog.Logger) error {
	stored := map[int]int{}
	for cursor, pages := "", 0; pages < 10000; pages++ {
		var page struct {
			Data []struct {
				Subject string `json:"subject"`
			} `json:"data"`
			NextCursor string `json:"next_cursor"`
		}
		if err := api.getRetrying(ctx, "/v1/received?limit=100&cursor="+url.QueryEscape(cursor), &page); err != nil {
			return fmt.Errorf("soak receive: list: %w", err)
		}
		for _, m := range page.Data {
			var n int
			if _, err := fmt.Sscanf(m.Subject, "Soak recv %d", &n); err == nil {
				stored[n]++
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rep.Received = receiveFigures{Messages: rl.next, Accepted: len(rl.acked), Stored: len(stored), Tries: rl.tries, Retries: rl.retries}
	for _, px := range rl.proxies {
		rep.Received.RepliesDropped += int(px.Dropped())
	}
	for n := 1; n <= rl.next; n++ {
		switch c := stored[n]; {
		case c > 1:
			rep.ReceivedTwice++
			rep.Findings = append(rep.Findings, fmt.Sprintf("received message %d stored %d times", n, c))
		case c == 0 && rl.acked[n]:
			rep.ReceivedLost++
			rep.Findings = append(rep.Findings, fmt.Sprintf("received message %d was accepted (250) but is not stored", n))
		}
	}
	logger.Info("receiving leg judged", slog.Int("messages", rl.next), slog.Int("accepted", len(rl.acked)),
		slog.Int("stored", len(stored)), slog.Int("retries", rl.retries))
	return nil
}

// receiveFigures are the receiving leg's figures in the report.
type receiveFigures struct {
	Messages       int `json:"messages"`
	Accepted       int `json:"accepted"`
	Stored         int `json:"stored"`
	Tries          int `json:"tries"`
	Retries        int `json:"retries"`
	RepliesDropped int `json:"replies_dropped"`
}
