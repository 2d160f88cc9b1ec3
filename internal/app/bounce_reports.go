package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dsn"
)

// Reports that come back to --bounce-domain addresses, as the inbound
// listener hands them over: what a report does to its send (recipient
// outcomes, events, suppressions), keyed by the send its verified token
// names, and never further than the recipients that token speaks for.

// BounceReport is one message received for one bounce address of
// --bounce-domain: a delivery status notification or a feedback report
// about the send its verified token names.
type BounceReport struct {
	SendID string // from the verified token
	// Bound is the index of the recipient the token is bound to
	// (verp.Signer.RecipientAddress), -1 for a send-level token.
	Bound    int
	MailFrom string
	RcptTo   string
	Raw      []byte
}

// ReportResult says what recording a report did.
type ReportResult string

const (
	ReportRecorded  ReportResult = "recorded"  // a report changed its send
	ReportDuplicate ReportResult = "duplicate" // the same report was recorded before
	ReportUnmatched ReportResult = "unmatched" // kept as an unmatched item
	ReportDropped   ReportResult = "dropped"   // unusable, and the tenant keeps the most unmatched items already
)

// RecordBounceReport applies one message to its send in one transaction: the report's
// recipient outcomes, their events and suppressions, and the send's
// status; or, when it cannot be used, an unmatched item. Everything is
// keyed by the send the verified token names: a report whose Message-ID or
// recipients are another send's changes nothing (it is kept unmatched in
// the token's tenant), so a report can never touch another tenant's send.
// Provider events, the same outcomes reported over HTTPS, are
// RecordProviderEvent.
func (s *Service) RecordBounceReport(ctx context.Context, m BounceReport) (ReportResult, error) {
	rep, perr := dsn.Parse(bytes.NewReader(m.Raw))
	now := s.Now().UTC()
	var res ReportResult
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		var err error
		var changes []RecipientChange
		var send *core.Send
		res, send, changes, err = recordReport(ctx, tx, m, rep, perr, now)
		if err != nil || res != ReportRecorded {
			return err
		}
		return s.guardOutcomes(ctx, tx, send, changes, now)
	})
	if err != nil {
		return "", fmt.Errorf("record bounce report: %w", err)
	}
	return res, nil
}

// recordReport applies the report; for a recorded one it returns the
// send and the changes applied (the reputation guard judges them).
func recordReport(ctx context.Context, tx core.Tx, m BounceReport, rep *dsn.Report, perr error, now time.Time) (ReportResult, *core.Send, []RecipientChange, error) {
	send, err := tx.SendForUpdate(ctx, m.SendID)
	if errors.Is(err, core.ErrNotFound) {
		res, err := unmatchedReport(ctx, tx, m, "", "the send no longer exists (purged after its retention)", now)
		return res, nil, nil, err
	}
	if err != nil {
		return "", nil, nil, err
	}
	res, changes, err := applyReport(ctx, tx, m, send, rep, perr, now)
	return res, send, changes, err
}

func applyReport(ctx context.Context, tx core.Tx, m BounceReport, send *core.Send, rep *dsn.Report, perr error, now time.Time) (ReportResult, []RecipientChange, error) {
	unmatched := func(reason string) (ReportResult, []RecipientChange, error) {
		res, err := unmatchedReport(ctx, tx, m, send.Tenant, reason, now)
		return res, nil, err
	}
	if perr != nil {
		return unmatched("not a report: " + perr.Error())
	}
	if rep.OriginalMessageID != "" && !sameMessageID(rep.OriginalMessageID, send.MessageID) {
		return unmatched("the report is about another message (" + rep.OriginalMessageID + ")")
	}
	changes, why := reportChanges(send, rep)
	if len(changes) > 0 {
		changes, why = reportAllowed(send, m.Bound, changes)
	}
	if len(changes) == 0 {
		return unmatched(why)
	}
	if n, err := tx.ReportCount(ctx, send.ID); err != nil || n >= core.MaxReportsPerSend {
		if err != nil {
			return "", nil, err
		}
		return unmatched(fmt.Sprintf("the send has %d reports already, the most recorded", n))
	}
	first, err := tx.RecordReport(ctx, core.ReportParams{Digest: reportDigest(send.ID, rep.Digest), Tenant: send.Tenant, SendID: send.ID, At: now})
	if err != nil || !first {
		return ReportDuplicate, nil, err
	}
	if err := ApplyRecipientChanges(ctx, tx, send, changes, now); err != nil {
		return "", nil, err
	}
	return ReportRecorded, changes, nil
}

func reportDigest(sendID, d string) string {
	h := sha256.Sum256([]byte(sendID + "\x00" + d))
	return hex.EncodeToString(h[:])
}

func sameMessageID(a, b string) bool {
	norm := func(s string) string { return strings.ToLower(strings.Trim(strings.TrimSpace(s), "<>")) }
	return norm(a) == norm(b)
}

func unmatchedReport(ctx context.Context, tx core.Tx, m BounceReport, tenant, reason string, now time.Time) (ReportResult, error) {
	if n, err := tx.UnmatchedCount(ctx, tenant); err != nil || n >= core.MaxUnmatchedPerTenant {
		return ReportDropped, err
	}
	u := &core.UnmatchedInbound{ID: NewID("inb_"), Tenant: tenant, SendID: m.SendID, MailFrom: m.MailFrom,
		RcptTo: m.RcptTo, Reason: reason, Raw: m.Raw, ReceivedAt: now}
	return ReportUnmatched, tx.InsertUnmatched(ctx, u)
}

// reportChanges turns a report into changes of the send's recipients; why
// says why there are none.
func reportChanges(s *core.Send, rep *dsn.Report) ([]RecipientChange, string) {
	rcpts := RecipientsOf(s)
	match := func(cands ...string) string {
		for _, c := range cands {
			if n := core.NormalizeAddress(c); n != "" && slices.Contains(rcpts, n) {
				return n
			}
		}
		return ""
	}
	if rep.Kind == dsn.KindARF {
		f := rep.Feedback
		addr := match(append(f.OriginalRcptTo, f.OriginalTo...)...)
		if addr == "" && len(rcpts) == 1 && len(f.OriginalRcptTo) == 0 {
			addr = rcpts[0] // a redacted report of a single-recipient send
		}
		if addr == "" {
			return nil, "the feedback report names no recipient of the send"
		}
		detail := "complaint (" + f.Type + ")"
		if f.UserAgent != "" {
			detail += " reported by " + f.UserAgent
		}
		return []RecipientChange{{Address: addr, Status: core.StatusComplained, Event: core.EventComplained, Detail: detail,
			Suppress: detail, Origin: core.SuppressionComplaint}}, ""
	}
	var out []RecipientChange
	for _, r := range rep.Recipients {
		addr := match(r.OriginalRecipient, r.FinalRecipient)
		if addr == "" {
			continue
		}
		if c, ok := dsnChange(addr, r); ok {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, "the delivery status notification names no recipient of the send with an outcome we record"
	}
	return out, ""
}

// dsnChange is RFC 3464's per-recipient fields as a change (contract,
// section 11). relayed and expanded say nothing final: no change.
func dsnChange(addr string, r dsn.Recipient) (RecipientChange, bool) {
	status := effectiveStatus(r.Status, r.DiagnosticCode)
	var diag []string
	if r.DiagnosticCode != "" {
		diag = []string{r.DiagnosticCode}
	}
	detail := strings.TrimSpace(status + " " + r.DiagnosticCode)
	switch {
	case r.Action == "failed" && !strings.HasPrefix(status, "4."):
		b := &core.Bounce{Type: core.BouncePermanent, SubType: core.BounceSubType(status), Status: status,
			Message: "the recipient's mail system refused the message for good", DiagnosticCode: diag}
		c := RecipientChange{Address: addr, Status: core.StatusBounced, Event: core.EventBounced, Detail: detail, Bounce: b}
		if core.Suppresses(status) {
			c.Suppress, c.Origin = "bounce "+detail, core.SuppressionBounce
		}
		return c, true
	case r.Action == "failed" || r.Action == "delayed":
		b := &core.Bounce{Type: core.BounceTransient, SubType: core.BounceSubType(status), Status: status,
			Message: "delivery is delayed; the reporting server keeps trying", DiagnosticCode: diag}
		return RecipientChange{Address: addr, Status: core.RecipientDelayed, Event: core.EventDeliveryDelayed, Detail: detail, Bounce: b}, true
	case r.Action == "delivered":
		return RecipientChange{Address: addr, Status: core.StatusDelivered, Event: core.EventDelivered, Detail: detail}, true
	}
	return RecipientChange{}, false
}

// effectiveStatus is the DSN's Status, or, when that is only a class
// (X.0.0, as Exim writes), the more telling code of the same class in the
// diagnostic.
func effectiveStatus(status, diag string) string {
	if status == "" || strings.HasSuffix(status, ".0.0") {
		for _, f := range strings.FieldsFunc(diag, func(r rune) bool { return r == ' ' || r == ';' || r == '(' || r == ')' }) {
			if isCode(f) && (status == "" || f[0] == status[0]) && !strings.HasSuffix(f, ".0.0") {
				return f
			}
		}
	}
	return status
}

func isCode(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || (parts[0] != "2" && parts[0] != "4" && parts[0] != "5") {
		return false
	}
	for _, p := range parts[1:] {
		if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// reportAllowed keeps the changes the report's bounce address may speak for. A
// recipient reads the address in its copy's Return-Path and can mail a
// forged report to it, so the address is trusted for the recipients its
// transaction carried, and no further:
//   - bound to one recipient (one transaction carried that recipient
//     alone): that recipient's changes; a report about anyone else
//     changes nothing;
//   - the send's own address of a single-recipient send: its recipient
//     (the only one there is);
//   - the send's own address of a send with several recipients (one
//     transaction carried them all, or an older version sent it): any of
//     them could have written the report, so it changes nothing and is
//     kept for review among the unmatched items.
//
// why says why nothing is left.
func reportAllowed(send *core.Send, bound int, changes []RecipientChange) ([]RecipientChange, string) {
	rcpts := RecipientsOf(send)
	var only string
	switch {
	case bound >= 0 && bound < len(rcpts):
		only = rcpts[bound]
	case bound >= 0:
		return nil, "the bounce address names a recipient the send does not have"
	case len(rcpts) == 1:
		only = rcpts[0]
	default:
		return nil, fmt.Sprintf("the report came to the bounce address the send's %d recipients share, so any of them could have written it: not applied", len(rcpts))
	}
	var out []RecipientChange
	for _, c := range changes {
		if c.Address == only {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, "the report names a recipient other than the one its bounce address was made for: not applied"
	}
	return out, ""
}
