package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/dmarcreport"
	"github.com/sendonce/sendonce/internal/inmail"
)

// DMARC aggregate reports received at an inbox marked dmarc_reports
// (docs/deliverability.md, "DMARC aggregate reports"): read whole and
// kept once per reporter and report id, or kept as unmatched mail, never
// half-stored.

// SetDMARCReports marks the tenant's inbox as a report address, or
// not, in the caller's transaction (the one that creates the inbox).
func (s *Service) SetDMARCReports(ctx context.Context, tx core.Tx, tenant, mailboxID string, on bool) error {
	return tx.SetDMARCInbox(ctx, tenant, mailboxID, on)
}

// UpdateInboxDMARC changes an existing inbox's dmarc_reports setting.
func (s *Service) UpdateInboxDMARC(ctx context.Context, key *core.APIKey, mailboxID string, on bool) error {
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.SetDMARCInbox(ctx, key.Tenant, mailboxID, on) })
}

// receiveDMARC stores a message that came to a report address: the
// report it carries, once per reporter and report id (a resent report is
// answered as the first), or the message as unmatched mail with the
// reason it could not be used.
func (s *Service) receiveDMARC(ctx context.Context, in Incoming) (Received, error) {
	now := s.Now().UTC()
	rep, why := s.readDMARC(ctx, in)
	var out Received
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		if why != "" {
			id, err := s.unmatchedDMARC(ctx, tx, in, why, now)
			out = Received{ID: id}
			return err
		}
		rep.ID, rep.ReceivedAt = NewID("dmr_"), now
		id, inserted, err := tx.InsertDMARCReport(ctx, rep)
		if err != nil {
			return err
		}
		out = Received{ID: id, Duplicate: !inserted}
		if !inserted {
			return nil
		}
		return s.keepNewestDMARC(ctx, tx, in.Tenant)
	})
	if err != nil {
		return Received{}, fmt.Errorf("receive dmarc report for %s: %w", in.MailboxID, err)
	}
	s.logger.InfoContext(ctx, "dmarc report received", slog.String("id", out.ID), slog.String("mailbox", in.MailboxID),
		slog.Bool("duplicate", out.Duplicate), slog.Bool("unmatched", why != ""), slog.String("why", why))
	return out, nil
}

// keepNewestDMARC drops the tenant's oldest reports past its cap, in the
// transaction that stored a new one (counted after the insert, so the new
// report, the latest, is never the one dropped). Dropping rather than
// refusing keeps a report address useful after a flood: the flood can
// push old reports out, never stop the next real one.
func (s *Service) keepNewestDMARC(ctx context.Context, tx core.Tx, tenant string) error {
	max := s.cfg.MaxDMARCReports
	defaults.Set(&max, core.MaxDMARCReportsPerTenant)
	n, err := tx.DMARCReportCount(ctx, tenant)
	if err != nil || n <= max {
		return err
	}
	s.logger.InfoContext(ctx, "oldest dmarc reports dropped at the cap", slog.String("tenant", tenant), slog.Int("dropped", n-max))
	return tx.DeleteOldestDMARCReports(ctx, tenant, n-max)
}

func (s *Service) unmatchedDMARC(ctx context.Context, tx core.Tx, in Incoming, why string, now time.Time) (string, error) {
	if n, err := tx.UnmatchedCount(ctx, in.Tenant); err != nil || n >= core.MaxUnmatchedPerTenant {
		return "", err // dropped: the tenant keeps the most unmatched items already
	}
	u := &core.UnmatchedInbound{ID: NewID("inb_"), Tenant: in.Tenant, MailFrom: in.MailFrom,
		RcptTo: strings.Join(in.RcptTo, ", "), Reason: "DMARC report not stored: " + why, Raw: in.Raw, ReceivedAt: now}
	return u.ID, tx.InsertUnmatched(ctx, u)
}

// readDMARC finds the report in the message and reads it; why says why
// it cannot be stored ("" when it can).
func (s *Service) readDMARC(ctx context.Context, in Incoming) (*core.DMARCReport, string) {
	p, err := inmail.Parse(in.Raw)
	if err != nil {
		return nil, "the message could not be read"
	}
	att, ok := reportAttachment(p.Attachments)
	if !ok {
		return nil, "the message carries no report (an .xml, .gz or .zip attachment)"
	}
	if int64(att.Size) > dmarcreport.DefaultMaxInput {
		return nil, fmt.Sprintf("the report attachment is %d bytes, past the limit of %d", att.Size, dmarcreport.DefaultMaxInput)
	}
	data, err := inmail.Part(in.Raw, att.Part)
	if err != nil {
		return nil, "the report attachment could not be decoded"
	}
	rep, err := dmarcreport.Parse(data, dmarcreport.Limits{})
	if err != nil {
		return nil, err.Error() // the parser's errors name classes and limits, never input
	}
	ok, err = s.tenantHasDomain(ctx, in.Tenant, rep.Policy.Domain)
	if err != nil {
		return nil, "the tenant's domains could not be read"
	}
	if !ok {
		return nil, "the report is about " + rep.Policy.Domain + ", not one of the tenant's domains"
	}
	return dmarcView(in, rep), ""
}

// reportAttachment picks the part that holds the report: reporters send
// it as application/zip, application/gzip (or x- forms), text/xml, or
// application/octet-stream named *.zip, *.gz, *.xml.
func reportAttachment(atts []core.ReceivedAttachment) (core.ReceivedAttachment, bool) {
	for _, a := range atts {
		ct, name := strings.ToLower(a.ContentType), strings.ToLower(a.Filename)
		switch {
		case strings.Contains(ct, "zip"), strings.Contains(ct, "gzip"), strings.HasSuffix(ct, "/xml"),
			strings.HasSuffix(name, ".zip"), strings.HasSuffix(name, ".gz"), strings.HasSuffix(name, ".xml"):
			return a, true
		}
	}
	return core.ReceivedAttachment{}, false
}

// tenantHasDomain: domain is one the tenant has added, or under one.
func (s *Service) tenantHasDomain(ctx context.Context, tenant, domain string) (bool, error) {
	ds, err := s.store.ListDomains(ctx, tenant)
	if err != nil {
		return false, err
	}
	for _, d := range ds {
		if domain == d.Domain || strings.HasSuffix(domain, "."+d.Domain) {
			return true, nil
		}
	}
	return false, nil
}

func dmarcView(in Incoming, rep *dmarcreport.Report) *core.DMARCReport {
	key := sha256.Sum256([]byte(strings.ToLower(rep.OrgName) + "\x00" + strings.ToLower(rep.Email) + "\x00" + rep.ReportID))
	d := &core.DMARCReport{Tenant: in.Tenant, MailboxID: in.MailboxID, DedupKey: hex.EncodeToString(key[:]),
		OrgName: rep.OrgName, Email: rep.Email, ExtraContactInfo: rep.ExtraContactInfo, ReportID: rep.ReportID,
		Domain: rep.Policy.Domain, Begin: rep.Begin, End: rep.End, RecordCount: len(rep.Records),
		Policy: core.DMARCPolicy{ADKIM: rep.Policy.ADKIM, ASPF: rep.Policy.ASPF, P: rep.Policy.P, SP: rep.Policy.SP, Pct: rep.Policy.Pct}}
	d.Messages, d.Pass, d.Fail = rep.Totals()
	for _, r := range rep.Records {
		from := r.HeaderFrom
		if from == "" {
			from = rep.Policy.Domain
		}
		c := core.DMARCRecord{SourceIP: r.SourceIP, Count: r.Count, Disposition: r.Disposition, DKIM: r.DKIM, SPF: r.SPF,
			Pass: r.Pass(), HeaderFrom: r.HeaderFrom, EnvelopeFrom: r.EnvelopeFrom, EnvelopeTo: r.EnvelopeTo}
		for _, x := range r.Reasons {
			c.Reasons = append(c.Reasons, core.DMARCReason{Type: x.Type, Comment: x.Comment})
		}
		for _, x := range r.DKIMResults {
			c.DKIMResults = append(c.DKIMResults, core.DMARCDKIMResult{Domain: x.Domain, Selector: x.Selector, Result: x.Result,
				HumanResult: x.HumanResult, Aligned: aligned(x.Domain, from, rep.Policy.ADKIM)})
		}
		for _, x := range r.SPFResults {
			c.SPFResults = append(c.SPFResults, core.DMARCSPFResult{Domain: x.Domain, Scope: x.Scope, Result: x.Result,
				Aligned: aligned(x.Domain, from, rep.Policy.ASPF)})
		}
		d.Records = append(d.Records, c)
	}
	return d
}

// aligned is RFC 7489 3.1's identifier alignment: strict ("s") the same
// name, relaxed (the default) the same organizational domain.
func aligned(domain, from, mode string) bool {
	if domain == "" || from == "" {
		return false
	}
	if domain == from {
		return true
	}
	if mode == "s" {
		return false
	}
	a, errA := publicsuffix.EffectiveTLDPlusOne(domain)
	b, errB := publicsuffix.EffectiveTLDPlusOne(from)
	return errA == nil && errB == nil && a == b
}
