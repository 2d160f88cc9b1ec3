package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// ProviderEvent is one event a provider reported about a message it was
// handed (SES through SNS, Resend's webhooks), after its signature was
// verified.
type ProviderEvent struct {
	// Provider is "ses" or "resend".
	Provider string
	// EventID identifies the event: the same event delivered twice has
	// the same id (SNS's MessageId, Resend's svix-id).
	EventID string
	// Type is the provider's name for it ("Delivery", "email.bounced").
	Type string
	// ProviderMessageID is the provider's id for the message.
	ProviderMessageID string
	// MessageID is the message's own Message-ID header, when the event
	// carries it; SendID the send id tag, when it carries one. They find
	// a send whose provider never gave its id (an answer that was lost).
	MessageID, SendID string
	// Accepted: the event proves the provider took the message (SES Send
	// or Delivery, Resend email.sent or email.delivered); it settles an
	// unknown send as sent.
	Accepted bool
	// Failed: the provider took the message and will not deliver it (SES
	// Reject, Resend email.failed); Detail says why. It fails only an
	// unknown send: after sent it is ignored.
	Failed bool
	Detail string
	// Changes are its recipients' outcomes; addresses as the provider
	// wrote them (those that are not the send's are left out).
	Changes []RecipientChange
}

// IntakeResult is what recording a provider event did.
type IntakeResult string

const (
	IntakeRecorded  IntakeResult = "recorded"
	IntakeDuplicate IntakeResult = "duplicate"
	// IntakeUnmatched: no send of this provider is the one it names.
	IntakeUnmatched IntakeResult = "unmatched"
)

// RecordProviderEvent applies a verified provider event to the send it
// names, in one transaction. The send is found by the provider's message
// id; or, for a send pinned to that provider whose id was never known
// (its answer was lost), by the message's Message-ID or send id tag. The
// event can only touch that send, whatever tenant it is in: the tenant is
// the send's. The same event twice is recorded once.
func (s *Service) RecordProviderEvent(ctx context.Context, ev ProviderEvent) (IntakeResult, error) {
	var res IntakeResult
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		var err error
		res, err = s.recordProviderEvent(ctx, tx, ev)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("record %s event: %w", ev.Provider, err)
	}
	return res, nil
}

func (s *Service) recordProviderEvent(ctx context.Context, tx core.Tx, ev ProviderEvent) (IntakeResult, error) {
	send, prov, err := findProviderSend(ctx, tx, ev)
	if errors.Is(err, core.ErrNotFound) {
		return IntakeUnmatched, nil
	}
	if err != nil {
		return "", err
	}
	now := s.Now()
	h := sha256.Sum256([]byte("provider\x00" + ev.Provider + "\x00" + ev.EventID))
	first, err := tx.RecordReport(ctx, core.ReportParams{Digest: hex.EncodeToString(h[:]), Tenant: send.Tenant, SendID: send.ID, At: now})
	if err != nil || !first {
		return IntakeDuplicate, err
	}
	if prov.MessageID == "" && ev.ProviderMessageID != "" {
		if prov.Since.IsZero() {
			prov.Since = now
		}
		prov.MessageID, prov.UpdatedAt = ev.ProviderMessageID, now
		if err := tx.SetSendProvider(ctx, prov); err != nil {
			return "", err
		}
	}
	why := fmt.Sprintf("%s reported %s", ev.Provider, ev.Type)
	switch {
	case ev.Failed && send.Status == core.StatusUnknown:
		// A failure report (SES Reject, Resend email.failed) settles only a
		// send whose handoff has no known outcome; one the provider answered
		// with its id stays sent, so a report cannot undo a known handoff.
		send.Status, send.LastError, send.UpdatedAt = core.StatusFailed, why+": "+ev.Detail, now
		if err := tx.UpdateSend(ctx, send); err != nil {
			return "", err
		}
		if err := tx.AddEvent(ctx, send.ID, core.Event{Type: core.EventFailed, At: now, Detail: send.LastError}); err != nil {
			return "", err
		}
	case (ev.Accepted || len(ev.Changes) > 0 && !ev.Failed) && send.Status == core.StatusUnknown:
		// Evidence: the provider holds the message. The attempt token
		// stays, as markUnknown left it, so a late result is still known.
		send.Status, send.LastError, send.UpdatedAt, send.SentAt = core.StatusSent, "", now, &now
		if err := tx.UpdateSend(ctx, send); err != nil {
			return "", err
		}
		detail := why + " for this message: it was accepted, so the send whose handoff was interrupted is sent"
		if err := tx.AddEvent(ctx, send.ID, core.Event{Type: core.EventSent, At: now, Detail: detail}); err != nil {
			return "", err
		}
	}
	rcpts := RecipientsOf(send)
	var changes []RecipientChange
	for _, c := range ev.Changes {
		c.Address = core.NormalizeAddress(c.Address)
		if slices.Contains(rcpts, c.Address) {
			changes = append(changes, c)
		}
	}
	if err := ApplyRecipientChanges(ctx, tx, send, changes, now); err != nil {
		return "", err
	}
	return IntakeRecorded, s.guardOutcomes(ctx, tx, send, changes, now)
}

// findProviderSend finds the send an event names, with its provider
// record.
func findProviderSend(ctx context.Context, tx core.Tx, ev ProviderEvent) (*core.Send, *core.SendProvider, error) {
	send, prov, err := tx.SendByProviderMessage(ctx, ev.Provider, ev.ProviderMessageID)
	if err == nil || !errors.Is(err, core.ErrNotFound) {
		return send, prov, err
	}
	if ev.MessageID == "" {
		return nil, nil, core.ErrNotFound
	}
	send, prov, err = tx.SendByMessageID(ctx, ev.Provider, "<"+strings.Trim(strings.TrimSpace(ev.MessageID), "<>")+">", ev.SendID)
	if err != nil {
		return nil, nil, err
	}
	if prov == nil && ev.SendID == send.ID && send.Status == core.StatusUnknown {
		// A worker that died mid-attempt left no record of its handoff;
		// the message's Message-ID and its send id tag name this send.
		return send, &core.SendProvider{SendID: send.ID, Tenant: send.Tenant, Transport: ev.Provider, Provider: ev.Provider}, nil
	}
	// Otherwise only a send handed to this provider whose id it never
	// gave: any other send's Message-ID is not this provider's to report on.
	if prov == nil || prov.Provider != ev.Provider || prov.MessageID != "" {
		return nil, nil, core.ErrNotFound
	}
	return send, prov, nil
}

// BounceChange is a provider's bounced or delayed recipient as a change
// (the rule every intake shares: a permanent bounce suppresses).
func BounceChange(addr, typ, subType, status, diag, message string) RecipientChange {
	var diags []string
	if diag != "" {
		diags = []string{diag}
	}
	detail := strings.TrimSpace(status + " " + diag)
	if detail == "" {
		detail = strings.TrimSpace(subType + " " + message)
	}
	if typ != core.BouncePermanent {
		b := &core.Bounce{Type: core.BounceTransient, SubType: subType, Status: status, Message: message, DiagnosticCode: diags}
		return RecipientChange{Address: addr, Status: core.RecipientDelayed, Event: core.EventDeliveryDelayed, Detail: detail, Bounce: b}
	}
	b := &core.Bounce{Type: core.BouncePermanent, SubType: subType, Status: status, Message: message, DiagnosticCode: diags}
	// A provider's permanent bounce suppresses whatever its subtype: SES
	// and Resend both advise removing the address, and a second send to it
	// only bounces again (and counts against the sender's reputation).
	return RecipientChange{Address: addr, Status: core.StatusBounced, Event: core.EventBounced, Detail: detail, Bounce: b,
		Suppress: "bounce " + detail, Origin: core.SuppressionBounce}
}
