package app

import (
	"context"
	"errors"
	"net/mail"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/inmail"
)

// ReceivingRoute is the route of a recipient address (angle brackets and
// case do not matter); core.ErrNotFound when nothing here receives it.
func (s *Service) ReceivingRoute(ctx context.Context, address string) (*core.ReceivingAddress, error) {
	a := strings.ToLower(strings.Trim(strings.TrimSpace(address), "<>"))
	if a == "" || !strings.Contains(a, "@") {
		return nil, core.ErrNotFound
	}
	r, err := s.store.ReceivingRoute(ctx, a)
	if err == nil && r.MailboxID == "" {
		return nil, core.ErrNotFound // a receiving domain without a catch-all
	}
	return r, err
}

// visibleMailboxes narrows want (empty: all) to the mailboxes key may see;
// ok is false when nothing is left to see.
func visibleMailboxes(key *core.APIKey, want []string) ([]string, bool) {
	if len(key.Mailboxes) == 0 {
		return want, true
	}
	if len(want) == 0 {
		return key.Mailboxes, true
	}
	var out []string
	for _, id := range want {
		if key.MayUseMailbox(id) {
			out = append(out, id)
		}
	}
	return out, len(out) > 0
}

// ListReceived lists the received messages key may see.
func (s *Service) ListReceived(ctx context.Context, key *core.APIKey, f core.ReceivedFilter) ([]*core.ReceivedMessage, bool, error) {
	if f.Folder == core.FolderQuarantine && !key.MaySeeQuarantine() {
		return nil, false, core.Errorf(core.CodeForbidden, "folder", "only an admin key that is not an agent's lists the quarantine")
	}
	ids, ok := visibleMailboxes(key, f.MailboxIDs)
	if !ok {
		return []*core.ReceivedMessage{}, false, nil
	}
	f.MailboxIDs = ids
	return s.store.ListReceived(ctx, key.Tenant, f)
}

// ReceivedMessage returns one received message key may see; another
// tenant's or another mailbox's is core.ErrNotFound.
// A quarantined one is core.ErrNotFound too, unless key may see the
// quarantine: this is the read behind every door's get, raw, attachment,
// reply and forward.
func (s *Service) ReceivedMessage(ctx context.Context, key *core.APIKey, id string) (*core.ReceivedMessage, error) {
	return s.visibleReceived(ctx, key, id)
}

// ReceivedRaw returns the message's bytes as received.
func (s *Service) ReceivedRaw(ctx context.Context, key *core.APIKey, id string) ([]byte, error) {
	if _, err := s.ReceivedMessage(ctx, key, id); err != nil {
		return nil, err
	}
	return s.store.ReceivedRaw(ctx, key.Tenant, id)
}

// ReceivedAttachment returns one attachment and its bytes.
func (s *Service) ReceivedAttachment(ctx context.Context, key *core.APIKey, id, attID string) (*core.ReceivedAttachment, []byte, error) {
	m, err := s.ReceivedMessage(ctx, key, id)
	if err != nil {
		return nil, nil, err
	}
	i := slices.IndexFunc(m.Attachments, func(a core.ReceivedAttachment) bool { return a.ID == attID })
	if i < 0 {
		return nil, nil, core.ErrNotFound
	}
	raw, err := s.store.ReceivedRaw(ctx, key.Tenant, id)
	if err != nil {
		return nil, nil, err
	}
	b, err := inmail.Part(raw, m.Attachments[i].Part)
	if err != nil {
		return nil, nil, err
	}
	return &m.Attachments[i], b, nil
}

// ListThreads lists the threads key may see.
func (s *Service) ListThreads(ctx context.Context, key *core.APIKey, f core.ThreadFilter) ([]*core.Thread, bool, error) {
	ids, ok := visibleMailboxes(key, f.MailboxIDs)
	if !ok {
		return []*core.Thread{}, false, nil
	}
	f.MailboxIDs = ids
	return s.store.ListThreads(ctx, key.Tenant, f)
}

// Thread returns one thread key may see.
func (s *Service) Thread(ctx context.Context, key *core.APIKey, id string) (*core.Thread, error) {
	t, err := s.store.Thread(ctx, key.Tenant, id)
	if err != nil {
		return nil, err
	}
	if !key.MayUseMailbox(t.MailboxID) {
		return nil, core.ErrNotFound
	}
	return t, nil
}

// ThreadItems lists a thread's messages, oldest first.
func (s *Service) ThreadItems(ctx context.Context, key *core.APIKey, id string) ([]core.ThreadItem, error) {
	if _, err := s.Thread(ctx, key, id); err != nil {
		return nil, err
	}
	return s.store.ThreadItems(ctx, key.Tenant, id)
}

// ThreadChange is a change to a thread; nil fields stay.
type ThreadChange struct {
	Read   *bool
	Folder *string
	Labels *[]string
}

// MaxLabels bounds a thread's labels.
const MaxLabels = 20

// ChangeThread marks a thread read or unread, moves it, or sets its labels.
func (s *Service) ChangeThread(ctx context.Context, key *core.APIKey, id string, c ThreadChange) (*core.Thread, error) {
	t, err := s.Thread(ctx, key, id)
	if err != nil {
		return nil, err
	}
	if c.Folder != nil {
		switch *c.Folder {
		case core.FolderInbox, core.FolderArchive, core.FolderSpam, core.FolderTrash:
			t.Folder = *c.Folder
		default:
			return nil, core.Errorf(core.CodeValidation, "folder", "folder must be inbox, archive, spam or trash")
		}
	}
	if c.Labels != nil {
		if len(*c.Labels) > MaxLabels {
			return nil, core.Errorf(core.CodeValidation, "labels", "at most %d labels", MaxLabels)
		}
		for _, l := range *c.Labels {
			if l == "" || len(l) > 100 {
				return nil, core.Errorf(core.CodeValidation, "labels", "a label is 1 to 100 characters")
			}
		}
		t.Labels = slices.Compact(slices.Sorted(slices.Values(*c.Labels)))
	}
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		if c.Read != nil {
			if err := tx.SetThreadRead(ctx, key.Tenant, id, *c.Read); err != nil {
				return err
			}
		}
		if c.Folder != nil || c.Labels != nil {
			return tx.UpdateThread(ctx, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.store.Thread(ctx, key.Tenant, id)
}

// DeleteThread deletes a thread and its received messages.
func (s *Service) DeleteThread(ctx context.Context, key *core.APIKey, id string) error {
	if _, err := s.Thread(ctx, key, id); err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.DeleteThread(ctx, key.Tenant, id) })
}

// MarkReceived marks one received message read or unread.
func (s *Service) MarkReceived(ctx context.Context, key *core.APIKey, id string, read bool) error {
	if _, err := s.ReceivedMessage(ctx, key, id); err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.SetReceivedRead(ctx, key.Tenant, id, read) })
}

// ReplyRequest fills r to answer the received message id: its sender (or
// Reply-To), with replyAll its other recipients too but not the mailbox's
// own addresses; In-Reply-To, References and "Re: " from the message; the
// mailbox it arrived at as the sending mailbox unless r names one.
func (s *Service) ReplyRequest(ctx context.Context, key *core.APIKey, id string, replyAll bool, r *SendRequest) (*core.ReceivedMessage, error) {
	m, err := s.ReceivedMessage(ctx, key, id)
	if err != nil {
		return nil, err
	}
	own, err := s.ownAddresses(ctx, key.Tenant, m.MailboxID)
	if err != nil {
		return nil, err
	}
	to := replyTargets(m)
	if len(r.To) == 0 {
		r.To = without(to, own)
	}
	if replyAll {
		r.Cc = append(r.Cc, without(append(append([]string{}, m.To...), m.Cc...), append(own, r.To...))...)
	}
	if len(r.To) == 0 {
		return nil, core.Errorf(core.CodeValidation, "to", "the message has no sender to reply to")
	}
	if r.MailboxID == "" {
		r.MailboxID = m.MailboxID
	}
	if r.Subject == "" {
		r.Subject = ReplySubject(m.Subject)
	}
	if m.MessageID != "" {
		r.InReplyTo = m.MessageID
		refs := append(append([]string{}, m.References...), m.MessageID)
		if len(refs) > MaxReferences {
			refs = refs[len(refs)-MaxReferences:]
		}
		r.References = refs
	}
	return m, nil
}

func (s *Service) ownAddresses(ctx context.Context, tenant, mailboxID string) ([]string, error) {
	own, err := s.store.ReceivingAddresses(ctx, tenant, mailboxID)
	if err != nil {
		return nil, err
	}
	mb, err := s.Mailbox(ctx, tenant, mailboxID)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	if mb != nil {
		own = append(own, strings.ToLower(mb.Address))
	}
	return own, nil
}

// replyTargets is where a reply to m goes: its Reply-To when every
// address of it can be sent to, else its From. A stranger writes
// Reply-To; one that cannot be parsed must not make every reply fail.
func replyTargets(m *core.ReceivedMessage) []string {
	for _, a := range m.ReplyTo {
		if _, err := parseAddress("to", a); err != nil {
			return []string{m.From}
		}
	}
	if len(m.ReplyTo) == 0 {
		return []string{m.From}
	}
	return m.ReplyTo
}

func bareAddress(a string) string {
	p, err := mail.ParseAddress(a)
	if err != nil {
		return ""
	}
	return core.NormalizeAddress(p.Address)
}

// without is list less the addresses in drop, each address once.
func without(list, drop []string) []string {
	var out, seen []string
	for _, d := range drop {
		seen = append(seen, bareAddress(d), strings.ToLower(d))
	}
	for _, a := range list {
		n := bareAddress(a)
		if n == "" || slices.Contains(seen, n) {
			continue
		}
		seen = append(seen, n)
		out = append(out, a)
	}
	return out
}
