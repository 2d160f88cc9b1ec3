// Package inbound takes the mail that comes back to --bounce-domain
// addresses: an SMTP listener (server.go) and what a report does to its
// send (this file): recipient outcomes, events, suppressions.
package inbound

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

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dsn"
)

// Mail is one message received for one bounce address.
type Mail struct {
	SendID string // from the verified token
	// Bound is the index of the recipient the token is bound to
	// (verp.Signer.RecipientAddress), -1 for a send-level token.
	Bound    int
	MailFrom string
	RcptTo   string
	Raw      []byte
}

// Result says what recording a message did.
type Result string

const (
	Recorded  Result = "recorded"  // a report changed its send
	Duplicate Result = "duplicate" // the same report was recorded before
	Unmatched Result = "unmatched" // kept as an unmatched item
	Dropped   Result = "dropped"   // unusable, and the tenant keeps the most unmatched items already
)

// Record applies one message to its send in one transaction: the report's
// recipient outcomes, their events and suppressions, and the send's
// status; or, when it cannot be used, an unmatched item. Everything is
// keyed by the send the verified token names: a report whose Message-ID or
// recipients are another send's changes nothing (it is kept unmatched in
// the token's tenant), so a report can never touch another tenant's send.
func Record(ctx context.Context, store core.Transactor, m Mail, now time.Time) (Result, error) {
	rep, perr := dsn.Parse(bytes.NewReader(m.Raw))
	var res Result
	err := store.InTx(ctx, func(tx core.Tx) error {
		var err error
		res, err = record(ctx, tx, m, rep, perr, now)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("record inbound mail: %w", err)
	}
	return res, nil
}

func record(ctx context.Context, tx core.Tx, m Mail, rep *dsn.Report, perr error, now time.Time) (Result, error) {
	send, err := tx.SendForUpdate(ctx, m.SendID)
	if errors.Is(err, core.ErrNotFound) {
		return unmatched(ctx, tx, m, "", "the send no longer exists (purged after its retention)", now)
	}
	if err != nil {
		return "", err
	}
	if perr != nil {
		return unmatched(ctx, tx, m, send.Tenant, "not a report: "+perr.Error(), now)
	}
	if rep.OriginalMessageID != "" && !sameMessageID(rep.OriginalMessageID, send.MessageID) {
		return unmatched(ctx, tx, m, send.Tenant, "the report is about another message ("+rep.OriginalMessageID+")", now)
	}
	changes, why := changesOf(send, rep)
	if len(changes) > 0 {
		changes, why = allowed(send, m.Bound, changes)
	}
	if len(changes) == 0 {
		return unmatched(ctx, tx, m, send.Tenant, why, now)
	}
	if n, err := tx.ReportCount(ctx, send.ID); err != nil || n >= core.MaxReportsPerSend {
		if err != nil {
			return "", err
		}
		return unmatched(ctx, tx, m, send.Tenant, fmt.Sprintf("the send has %d reports already, the most recorded", n), now)
	}
	first, err := tx.RecordReport(ctx, core.ReportParams{Digest: reportDigest(send.ID, rep.Digest), Tenant: send.Tenant, SendID: send.ID, At: now})
	if err != nil || !first {
		return Duplicate, err
	}
	if err := app.ApplyRecipientChanges(ctx, tx, send, changes, now); err != nil {
		return "", err
	}
	return Recorded, nil
}

func reportDigest(sendID, d string) string {
	h := sha256.Sum256([]byte(sendID + "\x00" + d))
	return hex.EncodeToString(h[:])
}

func sameMessageID(a, b string) bool {
	norm := func(s string) string { return strings.ToLower(strings.Trim(strings.TrimSpace(s), "<>")) }
	return norm(a) == norm(b)
}

func unmatched(ctx context.Context, tx core.Tx, m Mail, tenant, reason string, now time.Time) (Result, error) {
	if n, err := tx.UnmatchedCount(ctx, tenant); err != nil || n >= core.MaxUnmatchedPerTenant {
		return Dropped, err
	}
	u := &core.UnmatchedInbound{ID: app.NewID("inb_"), Tenant: tenant, SendID: m.SendID, MailFrom: m.MailFrom,
		RcptTo: m.RcptTo, Reason: reason, Raw: m.Raw, ReceivedAt: now}
	return Unmatched, tx.InsertUnmatched(ctx, u)
}

// change is what a report says of one recipient of the send.
type change = app.RecipientChange

// changesOf turns a report into changes of the send's recipients; why
// says why there are none.
func changesOf(s *core.Send, rep *dsn.Report) ([]change, string) {
	rcpts := app.RecipientsOf(s)
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
		return []change{{Address: addr, Status: core.StatusComplained, Event: core.EventComplained, Detail: detail,
			Suppress: detail, Origin: core.SuppressionComplaint}}, ""
	}
	var out []change
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
func dsnChange(addr string, r dsn.Recipient) (change, bool) {
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
		c := change{Address: addr, Status: core.StatusBounced, Event: core.EventBounced, Detail: detail, Bounce: b}
		if core.Suppresses(status) {
			c.Suppress, c.Origin = "bounce "+detail, core.SuppressionBounce
		}
		return c, true
	case r.Action == "failed" || r.Action == "delayed":
		b := &core.Bounce{Type: core.BounceTransient, SubType: core.BounceSubType(status), Status: status,
			Message: "delivery is delayed; the reporting server keeps trying", DiagnosticCode: diag}
		return change{Address: addr, Status: core.RecipientDelayed, Event: core.EventDeliveryDelayed, Detail: detail, Bounce: b}, true
	case r.Action == "delivered":
		return change{Address: addr, Status: core.StatusDelivered, Event: core.EventDelivered, Detail: detail}, true
	}
	return change{}, false
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
