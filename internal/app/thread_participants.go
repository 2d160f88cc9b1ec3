package app

import (
	"context"
	"slices"

	"github.com/sendonce/sendonce/internal/core"
)

// maxParticipantSends bounds the sends read for a thread's participants.
const maxParticipantSends = 200

// ThreadParticipants are the addresses a reply to m may go to without a
// person's approval (docs/receiving.md), bare and lower case: the sender
// of m (its From and Reply-To, where a reply goes), the addresses the
// tenant itself wrote to in m's thread (its sends' To, Cc and Bcc, held
// and canceled ones aside), and
// the mailbox's own addresses. Not the To and Cc of received messages:
// strangers write those, and a Cc of theirs must not widen where an
// agent's reply-all goes.
func (s *Service) ThreadParticipants(ctx context.Context, key *core.APIKey, m *core.ReceivedMessage) ([]string, error) {
	var out []string
	add := func(as ...string) {
		for _, a := range as {
			if n := bareAddress(a); n != "" && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	add(m.From)
	add(m.ReplyTo...)
	items, err := s.store.ThreadItems(ctx, key.Tenant, m.ThreadID)
	if err != nil {
		return nil, err
	}
	sends := 0
	for i := len(items) - 1; i >= 0 && sends < maxParticipantSends; i-- {
		if items[i].Kind != core.ThreadSent {
			continue
		}
		sends++
		send, err := s.store.Send(ctx, key.Tenant, items[i].ID)
		if err != nil {
			continue // purged after its retention
		}
		if send.Status == core.StatusPendingApproval || send.Status == core.StatusCanceled {
			// Held (or refused) mail was not written by the tenant yet: an
			// agent's held reply to a stranger must not make the stranger
			// a participant of the next one.
			continue
		}
		add(send.To...)
		add(send.Cc...)
		add(send.Bcc...)
	}
	own, err := s.ownAddresses(ctx, key.Tenant, m.MailboxID)
	if err != nil {
		return nil, err
	}
	for _, a := range own {
		if n := core.NormalizeAddress(a); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
