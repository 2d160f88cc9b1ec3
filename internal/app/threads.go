package app

import (
	"context"
	"errors"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// threadFor puts m in a thread (docs/receiving.md, "Threads"): the thread
// of a message its In-Reply-To or References name; else, when they name a
// send of the tenant, a new thread holding that send; else a new thread.
// Never by subject: anyone can write "Re: <a subject>", and a stranger's
// message joined to a conversation would read as part of it, to a person
// and to an agent alike. It sets m.SendID when m answers one of the
// tenant's sends.
func (s *Service) threadFor(ctx context.Context, tx core.Tx, m *core.ReceivedMessage) error {
	ids := append(append([]string{}, m.References...), m.InReplyTo)
	ids = compactIDs(ids)
	send := s.answeredSend(ctx, m.Tenant, ids)
	if send != nil {
		m.SendID = send.ID
	}
	th, err := tx.ThreadOfMessageIDs(ctx, m.Tenant, ids)
	if err == nil {
		m.ThreadID = th
		return nil
	}
	if !errors.Is(err, core.ErrNotFound) {
		return err
	}
	key, _ := SubjectKey(m.Subject)
	t := &core.Thread{ID: NewID("thr_"), Tenant: m.Tenant, MailboxID: m.MailboxID, Subject: m.Subject,
		SubjectKey: key, Folder: core.FolderInbox, LastAt: m.ReceivedAt, CreatedAt: m.ReceivedAt}
	if err := tx.InsertThread(ctx, t); err != nil {
		return err
	}
	m.ThreadID = t.ID
	if send != nil {
		return tx.AddThreadItem(ctx, m.Tenant, t.ID, core.ThreadItem{Kind: core.ThreadSent, ID: send.ID,
			MessageID: send.MessageID, At: send.CreatedAt})
	}
	return nil
}

func compactIDs(ids []string) []string {
	out := ids[:0]
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && len(out) < 50 {
			out = append(out, id)
		}
	}
	return out
}

// answeredSend is the tenant's send whose Message-ID one of ids is (the
// last that is wins: In-Reply-To comes last). sendonce writes a send's id
// into its Message-ID, so the lookup is by primary key.
func (s *Service) answeredSend(ctx context.Context, tenant string, ids []string) *core.Send {
	for i := len(ids) - 1; i >= 0; i-- {
		local, _, ok := strings.Cut(strings.TrimPrefix(ids[i], "<"), "@")
		if !ok || !strings.HasPrefix(local, "snd_") {
			continue
		}
		send, err := s.store.Send(ctx, tenant, local)
		if err == nil && strings.EqualFold(send.MessageID, ids[i]) {
			return send
		}
	}
	return nil
}

// replyPrefixes are the subject prefixes mail clients write on replies and
// forwards, in the languages most clients ship.
var replyPrefixes = []string{"re:", "fwd:", "fw:", "aw:", "sv:", "wg:", "tr:", "rv:", "antw:"}

// SubjectKey is the subject without reply and forward prefixes, spaces
// folded, lower case; reply says whether a prefix was there.
func SubjectKey(subject string) (key string, reply bool) {
	s := strings.ToLower(strings.Join(strings.Fields(subject), " "))
	for changed := true; changed; {
		changed = false
		for _, p := range replyPrefixes {
			if strings.HasPrefix(s, p) {
				s, changed, reply = strings.TrimSpace(s[len(p):]), true, true
			}
		}
	}
	return s, reply
}

// joinThread puts a reply in the thread of the message it answers, when
// that is a thread here: only replies pay for the lookup.
func joinThread(ctx context.Context, tx core.Tx, send *core.Send) error {
	ids := compactIDs(append(append([]string{}, send.References...), send.InReplyTo))
	th, err := tx.ThreadOfMessageIDs(ctx, send.Tenant, ids)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.AddThreadItem(ctx, send.Tenant, th, core.ThreadItem{Kind: core.ThreadSent, ID: send.ID,
		MessageID: send.MessageID, At: send.CreatedAt}); err != nil {
		return err
	}
	// Answering a thread is reading it, as in every mail client: what it
	// received so far is no longer unread.
	return tx.SetThreadRead(ctx, send.Tenant, th, true)
}
