package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// domainView is a sending domain: never its private key, always the
// records to publish.
type domainView struct {
	Domain       string       `json:"domain"`
	Object       string       `json:"object"`
	Selector     string       `json:"selector"`
	Algorithm    string       `json:"algorithm"`
	KeyEncrypted bool         `json:"key_encrypted"`
	Records      []recordView `json:"records"`
	Receiving    bool         `json:"receiving"`
	CatchAll     *string      `json:"catch_all"`
	CreatedAt    string       `json:"created_at"`
}

type recordView struct {
	Purpose string   `json:"purpose"` // dkim, spf or dmarc
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Value   string   `json:"value"`
	Strings []string `json:"strings"`
	Note    *string  `json:"note"`
}

func viewDomain(d *core.Domain) (domainView, error) {
	recs, err := app.DomainRecords(d)
	if err != nil {
		return domainView{}, err
	}
	v := domainView{Domain: d.Domain, Object: "domain", Selector: d.Selector, Algorithm: d.Algorithm,
		KeyEncrypted: app.KeyEncrypted(d), Records: make([]recordView, 0, len(recs)), Receiving: d.Receiving,
		CatchAll: kit.OptString(d.CatchAll), CreatedAt: kit.RFC3339(d.CreatedAt)}
	for _, r := range recs {
		v.Records = append(v.Records, recordView{Purpose: r.Purpose, Name: r.Name, Type: r.Type, Value: r.Value,
			Strings: kit.NonNil(r.Strings), Note: kit.OptString(r.Note)})
	}
	return v, nil
}

// handleAddDomain generates the DKIM key before the transaction (see
// app.PrepareDomain); the write step only inserts it.
func (s *Server) handleAddDomain(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (kit.WriteStep, error) {
	var req struct {
		Domain    string `json:"domain"`
		Selector  string `json:"selector"`
		Algorithm string `json:"algorithm"`
		Receiving bool   `json:"receiving"`
		CatchAll  string `json:"catch_all"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	d, err := s.Svc.PrepareDomain(app.AddDomainParams{Tenant: key.Tenant, Domain: req.Domain, Selector: req.Selector, Algorithm: req.Algorithm,
		Receive: req.Receiving, CatchAll: req.CatchAll, Key: key})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.Svc.AddDomain(ctx, tx, d); err != nil {
			return 0, nil, err
		}
		v, err := viewDomain(d)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, v, nil
	}, nil
}

func (s *Server) handleGetDomain(w http.ResponseWriter, r *http.Request) {
	d, err := s.Svc.Domain(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("domain"))
	if err == nil {
		var v domainView
		if v, err = viewDomain(d); err == nil {
			kit.WriteJSON(w, http.StatusOK, v)
			return
		}
	}
	kit.WriteError(w, r, s.Logger, err)
}

func (s *Server) handleListDomains(w http.ResponseWriter, r *http.Request) {
	ds, err := s.Svc.ListDomains(r.Context(), kit.APIKeyFrom(r.Context()).Tenant)
	out := kit.ListView[domainView]{Object: "list"}
	if err == nil {
		out.Data, err = kit.TryViews(ds, viewDomain)
	}
	s.Answer(w, r, out, err)
}

func (s *Server) handleDeleteDomain(w http.ResponseWriter, r *http.Request) {
	d, err := s.Svc.Domain(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("domain"))
	if err == nil {
		err = s.Svc.RemoveDomain(r.Context(), d.Tenant, d.Domain)
	}
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, map[string]any{"domain": d.Domain, "object": "domain", "deleted": true})
}

// handleCheckDomain runs the DNS check of a domain the tenant added,
// through the server's configured resolver: a caller cannot choose where
// the server sends queries.
func (s *Server) handleCheckDomain(w http.ResponseWriter, r *http.Request) {
	rep, err := s.Svc.CheckDomain(r.Context(), app.DNSCheck{
		Tenant: kit.APIKeyFrom(r.Context()).Tenant, Domain: r.PathValue("domain"), RequireStored: true,
	})
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, checkView{Object: "dns_check", Level: rep.Level(), Report: rep})
}

// checkView is dnscheck's report (domain, selector, resolver, findings)
// with its overall level.
type checkView struct {
	Object string         `json:"object"`
	Level  dnscheck.Level `json:"level"`
	*dnscheck.Report
}
