package imapsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// errLeaseLost: another process holds the mailbox now; this one stops.
var errLeaseLost = errors.New("imapsync: the mailbox's lease was lost")

// catchUp hands messages of the selected inbox that st has not seen to
// the receiver, at most MaxPerPass of them (more is true when some are
// left for the next pass), in batches of cfg.BatchSize UIDs, saving st
// after each batch. Under a new UIDVALIDITY (the first sync, or the
// folder was recreated) it starts over with the messages of the last
// cfg.Days days: receiving recognises those it already has, so none is
// stored twice. The server's answer is walked, never expanded (pickUIDs).
func (m *mailboxSync) catchUp(ctx context.Context, c *imapclient.Client, sel *imap.SelectData) (more bool, err error) {
	st := m.state
	fresh := st.UIDValidity != sel.UIDValidity
	if fresh {
		st.UIDValidity, st.LastUID = sel.UIDValidity, 0
		m.since = m.s.cfg.Now().AddDate(0, 0, -m.s.cfg.Days)
	}
	// A first sync larger than a pass goes on with the same date bound.
	criteria := &imap.SearchCriteria{Since: m.since}
	if st.LastUID > 0 {
		criteria.UID = []imap.UIDSet{{imap.UIDRange{Start: imap.UID(st.LastUID + 1), Stop: 0}}}
	}
	found, err := c.UIDSearch(criteria, nil).Wait()
	if err != nil {
		return false, classed(ClassConnection, fmt.Errorf("search: %w", err))
	}
	// "n:*" always holds the last message, even below n: the window
	// keeps the new ones. A search cannot find more messages than the
	// folder holds, with room for some delivered since the SELECT.
	w := uidWindow{after: st.LastUID, next: uint32(sel.UIDNext), holds: sel.NumMessages, slack: uint32(m.s.cfg.MaxPerPass)}
	uids, more, err := pickUIDs(found.All, w, m.s.cfg.MaxPerPass)
	if err != nil {
		return false, classed(ClassLimit, err)
	}
	for batch := range slices.Chunk(uids, m.s.cfg.BatchSize) {
		if err := m.fetchBatch(ctx, c, batch); err != nil {
			return false, err
		}
		st.LastUID = uint32(batch[len(batch)-1])
		if err := m.save(ctx, st); err != nil {
			return false, err
		}
	}
	if !more {
		if !m.since.IsZero() && sel.UIDNext > 0 && uint32(sel.UIDNext)-1 > st.LastUID {
			// The older messages are left out for good: the next look
			// starts after the last UID there was when the folder was
			// selected.
			st.LastUID = uint32(sel.UIDNext) - 1
		}
		m.since = time.Time{}
	}
	if fresh || len(uids) > 0 || st.LastUID != m.state.LastUID {
		return more, m.save(ctx, st)
	}
	return more, nil
}

// fetchBatch fetches the messages uids and hands each to the receiver as
// it streams in: one message's bytes at a time, at most MaxMessageBytes
// (a larger one is skipped and logged, never held).
func (m *mailboxSync) fetchBatch(ctx context.Context, c *imapclient.Client, uids []imap.UID) error {
	body := &imap.FetchItemBodySection{Peek: true}
	asked := imap.UIDSetNum(uids...)
	cmd := c.Fetch(asked, &imap.FetchOptions{
		UID: true, Flags: true, InternalDate: true, RFC822Size: true,
		BodySection: []*imap.FetchItemBodySection{body},
	})
	defer cmd.Close()
	for {
		msg := cmd.Next()
		if msg == nil {
			break
		}
		in, uid, err := m.readMessage(msg)
		if err != nil {
			return err
		}
		if in == nil || !asked.Contains(uid) {
			// Expunged, too large, or a message the FETCH did not ask
			// for (a server's own choice of what to push in).
			continue
		}
		if _, err := m.s.recv.Receive(ctx, *in); err != nil {
			return fmt.Errorf("receive message uid %d: %w", uid, err)
		}
		m.s.count(m.mb)
	}
	if err := cmd.Close(); err != nil {
		return classed(ClassConnection, fmt.Errorf("fetch: %w", err))
	}
	return nil
}

// readMessage reads one FETCH response into an Incoming; nil (no error)
// for a message too large to take.
func (m *mailboxSync) readMessage(msg *imapclient.FetchMessageData) (*app.Incoming, imap.UID, error) {
	in := &app.Incoming{Tenant: m.mb.Tenant, MailboxID: m.mb.ID, Source: "imap"}
	var (
		uid     imap.UID
		tooBig  bool
		gotBody bool
	)
	for {
		item := msg.Next()
		if item == nil {
			break
		}
		switch it := item.(type) {
		case imapclient.FetchItemDataUID:
			uid = it.UID
		case imapclient.FetchItemDataFlags:
			in.Seen = slices.Contains(it.Flags, imap.FlagSeen)
		case imapclient.FetchItemDataInternalDate:
			in.ReceivedAt = it.Time
		case imapclient.FetchItemDataRFC822Size:
			tooBig = it.Size > m.s.cfg.MaxMessageBytes
		case imapclient.FetchItemDataBodySection:
			if it.Literal == nil {
				continue
			}
			if tooBig || it.Literal.Size() > m.s.cfg.MaxMessageBytes {
				tooBig = true
				if _, err := io.Copy(io.Discard, it.Literal); err != nil {
					return nil, uid, classed(ClassConnection, err)
				}
				continue
			}
			raw, err := io.ReadAll(io.LimitReader(it.Literal, m.s.cfg.MaxMessageBytes+1))
			if err != nil {
				return nil, uid, classed(ClassConnection, fmt.Errorf("read message: %w", err))
			}
			in.Raw, gotBody = raw, true
		}
	}
	if tooBig {
		m.s.logger.Warn("imap sync skips a message larger than the limit",
			slog.String("tenant", m.mb.Tenant), slog.String("mailbox_id", m.mb.ID),
			slog.Uint64("uid", uint64(uid)), slog.Int64("limit", m.s.cfg.MaxMessageBytes))
		return nil, uid, nil
	}
	if !gotBody {
		// Expunged between SEARCH and FETCH, or a FETCH of flags only.
		return nil, uid, nil
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = m.s.cfg.Now()
	}
	return in, uid, nil
}

// save writes st under the mailbox's lease; errLeaseLost when another
// process took it.
func (m *mailboxSync) save(ctx context.Context, st core.IMAPSync) error {
	st.UpdatedAt = m.s.cfg.Now()
	held, err := m.s.store.SaveIMAPSync(ctx, m.s.cfg.Holder, &st)
	if err != nil {
		return fmt.Errorf("save imap sync state: %w", err)
	}
	if !held {
		return errLeaseLost
	}
	m.state = st
	return nil
}
