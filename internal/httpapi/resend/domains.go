package resend

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// Resend's /domains on sendonce's sending domains (app.AddDomain, the DNS
// check, the stored status). A domain's Resend id is its name: sendonce
// keys domains by name, and the name is as stable as a UUID would be.

// resendRegion is the region every domain reports: sendonce runs where it
// is installed, and Resend's clients expect the field.
const resendRegion = "self-hosted"

// resendCapabilities is Resend's capabilities object: a domain sends, and
// receives when it was added receiving (POST /v1/domains, sendonce
// domains add --receive).
type resendCapabilities struct {
	Sending   string `json:"sending"`
	Receiving string `json:"receiving"`
}

func capabilities(d *core.Domain) resendCapabilities {
	c := resendCapabilities{Sending: "enabled", Receiving: "disabled"}
	if d.Receiving {
		c.Receiving = "enabled"
	}
	return c
}

// resendRecord is one DNS record of Resend's records array. Names are
// relative to the domain ("@" for the domain itself), as Resend gives them
// and DNS hosts' forms expect.
type resendRecord struct {
	Record string `json:"record"` // DKIM, SPF or DMARC
	Name   string `json:"name"`
	Type   string `json:"type"`
	TTL    string `json:"ttl"`
	Status string `json:"status"`
	Value  string `json:"value"`
}

// resendDomainView is Resend's domain object (create, get and list share
// it; list leaves the records out).
type resendDomainView struct {
	Object        string             `json:"object"`
	ID            string             `json:"id"`
	Name          string             `json:"name"`
	Status        core.DomainStatus  `json:"status"`
	CreatedAt     string             `json:"created_at"`
	Region        string             `json:"region"`
	Capabilities  resendCapabilities `json:"capabilities"`
	OpenTracking  bool               `json:"open_tracking"`
	ClickTracking bool               `json:"click_tracking"`
	Records       []resendRecord     `json:"records,omitempty"`
}

func viewResendDomain(d *core.Domain, withRecords bool) (resendDomainView, error) {
	v := resendDomainView{Object: "domain", ID: d.Domain, Name: d.Domain, Status: d.Status, CreatedAt: kit.RFC3339(d.CreatedAt),
		Region: resendRegion, Capabilities: capabilities(d)}
	if !withRecords {
		return v, nil
	}
	recs, err := app.DomainRecords(d)
	if err != nil {
		return v, err
	}
	for _, r := range recs {
		name := strings.TrimSuffix(r.Name, "."+d.Domain)
		if r.Name == d.Domain {
			name = "@"
		}
		// Every record shows the domain's status: the DKIM key decides it,
		// SPF and DMARC are suggestions the check does not hold it to.
		v.Records = append(v.Records, resendRecord{Record: strings.ToUpper(r.Purpose), Name: name, Type: r.Type,
			TTL: "Auto", Status: string(d.Status), Value: r.Value})
	}
	return v, nil
}

// resendDomainOptions are the settings Resend's create and update take.
// sendonce has none of them, so each is accepted only at the value that
// means "as sendonce does anyway", and refused with the reason otherwise.
type resendDomainOptions struct {
	Region            string              `json:"region"`
	CustomReturnPath  string              `json:"custom_return_path"`
	OpenTracking      *bool               `json:"open_tracking"`
	ClickTracking     *bool               `json:"click_tracking"`
	TLS               string              `json:"tls"`
	TrackingSubdomain string              `json:"tracking_subdomain"`
	Capabilities      *resendCapabilities `json:"capabilities"`
}

func (o *resendDomainOptions) check() error {
	switch {
	case o.OpenTracking != nil && *o.OpenTracking, o.ClickTracking != nil && *o.ClickTracking:
		return core.Errorf(core.CodeValidation, "open_tracking", "sendonce does not track opens or clicks: it sends transactional mail as written")
	case o.TrackingSubdomain != "":
		return core.Errorf(core.CodeValidation, "tracking_subdomain", "sendonce does not track opens or clicks, so it has no tracking subdomain")
	case o.TLS != "":
		return core.Errorf(core.CodeValidation, "tls", "TLS is set per transport (--transport smtp://…?tls=starttls), not per domain")
	case o.CustomReturnPath != "":
		return core.Errorf(core.CodeValidation, "custom_return_path", "sendonce sends with the From address as the return path; a custom one is not supported")
	case o.Capabilities != nil && o.Capabilities.Receiving == "enabled":
		return core.Errorf(core.CodeValidation, "capabilities", "a domain receives when added with POST /v1/domains {\"receiving\": true} or sendonce domains add --receive; this route adds sending domains")
	case o.Capabilities != nil && o.Capabilities.Sending == "disabled":
		return core.Errorf(core.CodeValidation, "capabilities", "a sendonce domain always signs the mail sent from it; remove the domain to stop")
	}
	return nil
}

// handleResendCreateDomain generates the DKIM key before the transaction
// (see app.PrepareDomain); the write step only inserts it.
func (s *API) CreateDomain(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (kit.WriteStep, error) {
	var req struct {
		Name string `json:"name"`
		resendDomainOptions
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	d, err := s.Svc.PrepareDomain(app.AddDomainParams{Tenant: key.Tenant, Domain: req.Name})
	if err != nil {
		return nil, renameParam(err, "domain", "name")
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.Svc.AddDomain(ctx, tx, d); err != nil {
			return 0, nil, renameParam(err, "domain", "name")
		}
		v, err := viewResendDomain(d, true)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, v, nil
	}, nil
}

// renameParam names a native field by its Resend name in a validation
// error.
func renameParam(err error, native, resend string) error {
	var e *core.Error
	if errors.As(err, &e) && e.Param == native {
		return &core.Error{Code: e.Code, Param: resend, Message: e.Message}
	}
	return err
}

func (s *API) ListDomains(w http.ResponseWriter, r *http.Request) {
	ds, err := s.Svc.ListDomains(r.Context(), kit.APIKeyFrom(r.Context()).Tenant)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	out := kit.ResendList[resendDomainView]{Object: "list", Data: []resendDomainView{}}
	for _, d := range ds {
		v, _ := viewResendDomain(d, false) // without records it cannot fail
		out.Data = append(out.Data, v)
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

func (s *API) GetDomain(w http.ResponseWriter, r *http.Request) {
	d, err := s.Svc.Domain(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err == nil {
		var v resendDomainView
		if v, err = viewResendDomain(d, true); err == nil {
			kit.WriteJSON(w, http.StatusOK, v)
			return
		}
	}
	kit.WriteResendError(w, r, s.Logger, err)
}

// handleResendUpdateDomain stores nothing: every setting Resend's update
// takes is one sendonce does not have, accepted only at its off value.
func (s *API) UpdateDomain(w http.ResponseWriter, r *http.Request) {
	var req resendDomainOptions
	body, err := s.ReadBody(w, r)
	if err == nil {
		err = kit.DecodeStrict(body, &req)
	}
	if err == nil {
		err = req.check()
	}
	var d *core.Domain
	if err == nil {
		d, err = s.Svc.Domain(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, resendRef{Object: "domain", ID: d.Domain})
}

func (s *API) RemoveDomain(w http.ResponseWriter, r *http.Request) {
	d, err := s.Svc.Domain(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err == nil {
		err = s.Svc.RemoveDomain(r.Context(), d.Tenant, d.Domain)
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ResendDeleted{Object: "domain", ID: d.Domain, Deleted: true})
}

// handleResendVerifyDomain runs the DNS check (through the server's
// resolver, app.VerifyDomain) before the transaction, and stores the
// status it gives in it.
// Resend verifies in the background; sendonce answers when the check is
// done, so "pending" is seen only by readers while one runs.
func (s *API) VerifyDomain(ctx context.Context, key *core.APIKey, r *http.Request, _ []byte, _ string) (kit.WriteStep, error) {
	d, err := s.Svc.Domain(ctx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	status, err := s.Svc.VerifyDomain(ctx, d)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.Svc.RecordDomainStatus(ctx, tx, d, status); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, resendRef{Object: "domain", ID: d.Domain}, nil
	}, nil
}
