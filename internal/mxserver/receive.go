package mxserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/inmail"
)

// receive stores raw once per receiving mailbox among the recipients,
// each copy with the envelope recipients of its mailbox.
// It returns the received messages' ids (a duplicate's too: the same
// message again is the one stored before).
func (ss *session) receive(ctx context.Context, raw []byte) ([]string, error) {
	type box struct {
		tenant, id string
		rcpts      []string
	}
	var boxes []*box
	byID := map[string]*box{}
	for _, rc := range ss.rcpts {
		if rc.route == nil {
			continue
		}
		k := rc.route.Tenant + "\x00" + rc.route.MailboxID
		b, ok := byID[k]
		if !ok {
			b = &box{tenant: rc.route.Tenant, id: rc.route.MailboxID}
			byID[k] = b
			boxes = append(boxes, b)
		}
		b.rcpts = append(b.rcpts, rc.addr)
	}
	if len(boxes) == 0 {
		return nil, nil
	}
	auth := ss.check(ctx, raw)
	if auth.DMARCFailed && ss.s.cfg.RejectDMARCFail {
		return nil, errDMARC
	}
	var ids []string
	now := ss.s.cfg.Now().UTC()
	for _, b := range boxes {
		res, err := ss.s.cfg.Receiver.Receive(ctx, app.Incoming{Tenant: b.tenant, MailboxID: b.id, Source: "smtp",
			MailFrom: ss.from, RcptTo: b.rcpts, RemoteIP: ss.ipString(), Raw: raw, Auth: auth, ReceivedAt: now})
		if errors.Is(err, app.ErrReceivedStorageFull) {
			return nil, errFull
		}
		if err != nil {
			ss.s.cfg.Logger.ErrorContext(ctx, "inbound mail not stored", slog.String("mailbox", b.id), slog.Any("error", err))
			return nil, errTryLater
		}
		ss.s.cfg.Logger.InfoContext(ctx, "inbound received", slog.String("id", res.ID), slog.Bool("duplicate", res.Duplicate))
		ids = append(ids, res.ID)
	}
	return ids, nil
}

// maxNamedIDs bounds the ids a 250 names: a reply line stays short
// whatever the number of mailboxes among the recipients.
const maxNamedIDs = 5

// receivedReply is the 250 that names what was stored, so that the
// sender's log line (Postfix's "status=sent (250 …)") can be matched to
// a received message.
func receivedReply(ids []string) error {
	if len(ids) == 0 {
		return nil // go-smtp's own 250
	}
	named := strings.Join(ids[:min(len(ids), maxNamedIDs)], ", ")
	if len(ids) > maxNamedIDs {
		named += fmt.Sprintf(" and %d more", len(ids)-maxNamedIDs)
	}
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: "OK: received as " + named}
}

func (ss *session) check(ctx context.Context, raw []byte) core.ReceivedAuth {
	if ss.s.cfg.Checker == nil || ss.ip == nil {
		return core.ReceivedAuth{SPF: "none", DKIM: "none", DMARC: "none"}
	}
	// Only the header is read, within inmail's bounds (Data checked them).
	from := ""
	if n, err := inmail.HeaderSize(raw); err == nil {
		if msg, err := mail.ReadMessage(bytes.NewReader(raw[:n])); err == nil {
			from = msg.Header.Get("From")
		}
	}
	return ss.s.cfg.Checker.Check(ctx, ss.ip, ss.conn.Hostname(), ss.from, from, raw)
}

func (ss *session) ipString() string {
	if ss.ip == nil {
		return ""
	}
	return ss.ip.String()
}
