package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// dkimKeyView is one of a domain's DKIM keys, never its private key.
type dkimKeyView struct {
	Selector  string `json:"selector"`
	Algorithm string `json:"algorithm"`
	// State is active (signing), pending (waiting for its record),
	// retiring (stopped signing; keep its record) or retired (remove its
	// record).
	State string `json:"state"`
	// Since is when it entered its state (null for the active key);
	// RemoveAfter when a retiring key's record may go.
	Since       *string `json:"since"`
	RemoveAfter *string `json:"remove_after"`
}

// rotationView answers POST /v1/domains/{domain}/dkim/rotate.
type rotationView struct {
	Object    string       `json:"object"`
	Domain    string       `json:"domain"`
	Selector  string       `json:"selector"`
	Algorithm string       `json:"algorithm"`
	State     string       `json:"state"`
	Records   []recordView `json:"records"`
}

func viewRecord(r app.PublishRecord) recordView {
	return recordView{Purpose: r.Purpose, Name: r.Name, Type: r.Type, Value: r.Value,
		Strings: kit.NonNil(r.Strings), Note: kit.OptString(r.Note)}
}

// viewKeys lists d's keys, the signing one first.
func viewKeys(d *core.Domain) []dkimKeyView {
	out := []dkimKeyView{{Selector: d.Selector, Algorithm: d.Algorithm, State: string(core.DKIMActive)}}
	for _, k := range d.DKIMKeys {
		v := dkimKeyView{Selector: k.Selector, Algorithm: k.Algorithm, State: string(k.State), Since: kit.OptString(kit.RFC3339(k.Since))}
		if !k.RemoveAfter.IsZero() {
			v.RemoveAfter = kit.OptString(kit.RFC3339(k.RemoveAfter))
		}
		out = append(out, v)
	}
	return out
}

// rotationRecords are d's records to publish besides DomainRecords' and
// those to remove, as views.
func rotationRecords(d *core.Domain) (publish, remove []recordView) {
	p, r := app.RotationRecords(d)
	remove = make([]recordView, 0, len(r))
	for _, x := range p {
		publish = append(publish, viewRecord(x))
	}
	for _, x := range r {
		remove = append(remove, viewRecord(x))
	}
	return publish, remove
}

// handleRotateDKIM makes the new key before the transaction (it is slow,
// see app.PrepareDKIMRotation); the write step stores it pending. The
// body is optional: {"selector", "algorithm"}.
func (s *Server) handleRotateDKIM(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (kit.WriteStep, error) {
	var req struct {
		Selector  string `json:"selector"`
		Algorithm string `json:"algorithm"`
	}
	if len(body) > 0 {
		if err := kit.DecodeStrict(body, &req); err != nil {
			return nil, err
		}
	}
	k, err := s.Svc.PrepareDKIMRotation(ctx, app.RotateDKIMParams{Tenant: key.Tenant, Domain: r.PathValue("domain"),
		Selector: req.Selector, Algorithm: req.Algorithm})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.Svc.RotateDKIM(ctx, tx, k); err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, rotationView{Object: "dkim_rotation", Domain: k.Domain, Selector: k.Selector, Algorithm: k.Algorithm,
			State: string(k.State), Records: []recordView{viewRecord(app.DKIMKeyRecord(k))}}, nil
	}, nil
}

// checkView is dnscheck's report of the signing selector (domain,
// selector, resolver, findings) with its overall level, and the domain's
// DKIM keys: the pending key's own check, the selector this check moved
// signing to, and the records to remove.
type checkView struct {
	Object string         `json:"object"`
	Level  dnscheck.Level `json:"level"`
	*dnscheck.Report
	DKIMKeys        []dkimKeyView    `json:"dkim_keys"`
	PendingDKIM     *dnscheck.Report `json:"pending_dkim"`
	Promoted        *string          `json:"promoted_selector"`
	RecordsToRemove []recordView     `json:"records_to_remove"`
}

// handleCheckDomain runs the DNS check of a domain the tenant added,
// through the server's configured resolver: a caller cannot choose where
// the server sends queries. A pending DKIM key whose record is published
// becomes the signing key (app.CheckStoredDomain).
func (s *Server) handleCheckDomain(w http.ResponseWriter, r *http.Request) {
	res, err := s.Svc.CheckStoredDomain(r.Context(), app.DNSCheck{Tenant: kit.APIKeyFrom(r.Context()).Tenant, Domain: r.PathValue("domain")})
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	_, remove := rotationRecords(res.Domain)
	kit.WriteJSON(w, http.StatusOK, checkView{Object: "dns_check", Level: res.Report.Level(), Report: res.Report,
		DKIMKeys: viewKeys(res.Domain), PendingDKIM: res.Pending, Promoted: kit.OptString(res.Promoted), RecordsToRemove: remove})
}
