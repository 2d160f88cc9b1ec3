package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/inmail"
)

// Incoming is one message arriving for one receiving mailbox, from the
// inbound SMTP listener or a connected mailbox's IMAP sync.
type Incoming struct {
	Tenant    string
	MailboxID string
	// Source is where it came from: "smtp" or "imap".
	Source string
	// MailFrom and RcptTo are the SMTP envelope ("" and nil for IMAP).
	MailFrom string
	RcptTo   []string
	RemoteIP string
	Raw      []byte
	// Auth is what the listener's checks found (zero for IMAP: the
	// mailbox's own server checked it).
	Auth core.ReceivedAuth
	// Seen is the IMAP \Seen flag: the message arrives read.
	Seen       bool
	ReceivedAt time.Time
}

// Received says what receiving a message did.
type Received struct {
	ID       string // the received message's id ("rcv_…")
	ThreadID string
	// Duplicate: the same message (same Message-ID, envelope and content)
	// was received before; ID names that first copy and nothing was
	// written.
	Duplicate bool
	// Quarantined: the message was stored now, in the quarantine folder
	// (quarantineFolder) and in no thread (false for a duplicate).
	Quarantined bool
}

// DefaultMaxReceivedBytes is a tenant's raw received mail past which new
// mail is refused (452 over SMTP) until some is deleted or expires.
const DefaultMaxReceivedBytes = 1 << 30

// ErrReceivedStorageFull is a tenant past its received-mail storage cap.
var ErrReceivedStorageFull = errors.New("the tenant's received mail storage is full")

// DedupKey is what makes two deliveries the same received message: the
// mailbox, the Message-ID, the envelope and the SHA-256 of the bytes. A
// sending MTA that lost our 250 sends the very same queue file again, so
// all four match; a message that is only similar (another envelope, a
// re-sent copy with a new Date) is another message. For IMAP the envelope
// is empty: a folder resynchronised after a UIDVALIDITY change hands over
// the same bytes again.
func DedupKey(mailboxID, messageID, mailFrom string, rcptTo []string, digest string) string {
	rc := slices.Clone(rcptTo)
	for i := range rc {
		rc[i] = strings.ToLower(rc[i])
	}
	slices.Sort(rc)
	h := sha256.Sum256([]byte(strings.Join([]string{mailboxID, messageID, strings.ToLower(mailFrom),
		strings.Join(rc, ","), digest}, "\x00")))
	return hex.EncodeToString(h[:])
}

var errDuplicate = errors.New("duplicate received message")

// receive is Receive inside its span (ctx has it).
func (s *Service) receive(ctx context.Context, in Incoming) (Received, error) {
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = s.Now()
	}
	// A report address's mail is read as DMARC reports, not kept as mail.
	if dmarc, err := s.store.IsDMARCInbox(ctx, in.Tenant, in.MailboxID); err != nil {
		return Received{}, fmt.Errorf("receive for %s: %w", in.MailboxID, err)
	} else if dmarc {
		return s.receiveDMARC(ctx, in)
	}
	sum := sha256.Sum256(in.Raw)
	digest := hex.EncodeToString(sum[:])
	m := receivedView(in, digest)
	folder, err := s.quarantineFolder(ctx, m)
	if err != nil {
		return Received{}, fmt.Errorf("receive for %s: %w", in.MailboxID, err)
	}
	var out Received
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		if err := s.checkReceivedCap(ctx, tx, in.Tenant, len(in.Raw)); err != nil {
			return err
		}
		m.ID, m.ThreadID, m.SendID, m.Folder = NewID("rcv_"), "", "", folder
		// A quarantined message joins no thread until it is released:
		// a forged reply would otherwise show in a thread agents read.
		if folder != core.FolderQuarantine {
			if err := s.threadFor(ctx, tx, m); err != nil {
				return err
			}
		}
		id, thread, inserted, err := tx.InsertReceived(ctx, m, in.Raw)
		if err != nil {
			return err
		}
		out = Received{ID: id, ThreadID: thread, Duplicate: !inserted, Quarantined: inserted && folder == core.FolderQuarantine}
		if !inserted {
			return errDuplicate // roll back the thread this copy opened
		}
		if folder == core.FolderQuarantine {
			return nil // threaded, announced and counted as a reply when released
		}
		return s.fileReceived(ctx, tx, m)
	})
	if errors.Is(err, errDuplicate) {
		err = nil
	}
	if err != nil {
		return Received{}, fmt.Errorf("receive for %s: %w", in.MailboxID, err)
	}
	s.logger.InfoContext(ctx, "received", slog.String("id", out.ID), slog.String("mailbox", in.MailboxID),
		slog.Bool("duplicate", out.Duplicate), slog.Bool("quarantined", out.Quarantined), slog.String("source", in.Source))
	return out, nil
}

// fileReceived puts m, stored in the inbox folder, in its thread, records
// the reply on the send it answers and queues email.received: what
// receiving does at once, and releasing from the quarantine later.
func (s *Service) fileReceived(ctx context.Context, tx core.Tx, m *core.ReceivedMessage) error {
	if err := tx.AddThreadItem(ctx, m.Tenant, m.ThreadID, core.ThreadItem{Kind: core.ThreadReceived, ID: m.ID,
		MessageID: m.MessageID, At: m.ReceivedAt}); err != nil {
		return err
	}
	if m.SendID != "" && !s.hasReplied(ctx, m.Tenant, m.SendID) {
		if err := tx.AddEvent(ctx, m.SendID, core.Event{ID: NewID("evt_"), Type: core.EventReplied, At: m.ReceivedAt,
			Detail: "a reply was received: " + m.ID + "; the replies are in thread " + m.ThreadID}); err != nil {
			return err
		}
	}
	return queueReceivedWebhook(ctx, tx, m)
}

// checkReceivedCap reads the usage in the transaction that will add to
// it, holding it until that commits (ReceivedBytesForUpdate).
func (s *Service) checkReceivedCap(ctx context.Context, tx core.Tx, tenant string, size int) error {
	max := s.cfg.MaxReceivedBytes
	if max == 0 {
		max = DefaultMaxReceivedBytes
	}
	if max < 0 {
		return nil
	}
	used, err := tx.ReceivedBytesForUpdate(ctx, tenant)
	if err != nil {
		return err
	}
	if used+int64(size) > max {
		return ErrReceivedStorageFull
	}
	return nil
}

// receivedView parses the message; one that cannot be parsed is kept
// with its envelope alone (its raw bytes are still there to read).
func receivedView(in Incoming, digest string) *core.ReceivedMessage {
	m := &core.ReceivedMessage{Tenant: in.Tenant, MailboxID: in.MailboxID, Digest: digest, Source: in.Source,
		MailFrom: in.MailFrom, RcptTo: in.RcptTo, RemoteIP: in.RemoteIP, Auth: in.Auth, Size: len(in.Raw),
		Read: in.Seen, ReceivedAt: in.ReceivedAt.UTC()}
	if p, err := inmail.Parse(in.Raw); err == nil {
		m.MessageID, m.InReplyTo, m.References = p.MessageID, p.InReplyTo, p.References
		m.From, m.To, m.Cc, m.ReplyTo, m.Subject, m.Date = p.From, p.To, p.Cc, p.ReplyTo, p.Subject, p.Date
		m.Text, m.HTML, m.Headers, m.Attachments = p.Text, p.HTML, p.Headers, p.Attachments
		m.Preview = Preview(p.Text, p.HTML)
	} else {
		m.From = in.MailFrom
	}
	m.Sender = bareAddress(m.From)
	if in.Auth.Results != "" {
		m.Headers = append([]core.Header{{Name: "Authentication-Results", Value: in.Auth.Results}}, m.Headers...)
	}
	m.DedupKey = DedupKey(in.MailboxID, m.MessageID, in.MailFrom, in.RcptTo, digest)
	return m
}

// hasReplied reports whether the send's history has its replied entry.
// A send has one, at its first reply, which names the thread the replies
// are in: one entry per reply let strangers grow a send's history, which
// every read of the send returns, without bound (2,000 anonymous replies,
// 2,000 entries). Read outside the transaction: two first replies at once
// may both write one, which bounds it still.
func (s *Service) hasReplied(ctx context.Context, tenant, sendID string) bool {
	_, events, err := s.store.SendWithEvents(ctx, tenant, sendID)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(events, func(e core.Event) bool { return e.Type == core.EventReplied })
}
