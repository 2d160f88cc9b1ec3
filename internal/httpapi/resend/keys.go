package resend

import (
	"context"
	"net/http"
	"slices"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// Resend's /api-keys on sendonce's keys (app.CreateKeyBy, TenantKeys,
// RevokeTenantKey). The token is shown once, in the create answer; the
// database keeps its hash only, and the list never has a secret.

// Resend's permissions as sendonce scopes. sending_access may only send,
// as in Resend: it cannot read sends back or manage anything.
var resendPermissions = map[string][]core.Scope{
	"full_access":    {core.ScopeSend, core.ScopeRead, core.ScopeAdmin},
	"sending_access": {core.ScopeSend},
}

type resendKeyCreated struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// handleResendCreateKey is the one Resend POST that is not idempotent by
// key: a replay would have to return the token, and sendonce stores no
// token, not even in a stored answer. An Idempotency-Key is refused rather
// than ignored, so that no caller believes a retry is safe.
func (s *API) CreateKey(w http.ResponseWriter, r *http.Request) {
	if _, present := r.Header[http.CanonicalHeaderKey("Idempotency-Key")]; present {
		kit.WriteResendError(w, r, s.Logger, kit.ApiError(kit.CodeKeyInvalid, "Idempotency-Key",
			"POST /api-keys takes no Idempotency-Key: its answer holds the token, which sendonce never stores, so it cannot be replayed"))
		return
	}
	body, err := s.ReadBody(w, r)
	var p app.NewKeyParams
	if err == nil {
		p, err = s.resendKeyParams(r.Context(), kit.APIKeyFrom(r.Context()), body)
	}
	var k *core.APIKey
	var secret string
	if err == nil {
		k, secret, err = s.Svc.CreateKeyBy(r.Context(), kit.APIKeyFrom(r.Context()), p)
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, resendKeyCreated{ID: k.ID, Token: secret})
}

// resendKeyParams is the key a create body asks for, within what the
// creating key may give.
func (s *API) resendKeyParams(ctx context.Context, key *core.APIKey, body []byte) (app.NewKeyParams, error) {
	var none app.NewKeyParams
	var req struct {
		Name       string `json:"name"`
		Permission string `json:"permission"`
		DomainID   string `json:"domain_id"`
		// RateLimit is sendonce's: a lower request limit for the new key.
		RateLimit int `json:"rate_limit"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return none, err
	}
	if req.Permission == "" {
		req.Permission = "full_access" // Resend's default
	}
	scopes, ok := resendPermissions[req.Permission]
	if !ok {
		return none, core.Errorf(core.CodeValidation, "permission", "permission is full_access or sending_access")
	}
	// What the creating key may give (its mailboxes, allowlist, caps,
	// approval, a rate limit no higher than its own) is app.CreateKeyBy's
	// rule, the dashboard's too.
	p := app.NewKeyParams{Name: req.Name, Scopes: scopes, RateLimit: req.RateLimit}
	if req.DomainID != "" {
		if req.Permission != "sending_access" {
			return none, core.Errorf(core.CodeValidation, "domain_id", "domain_id limits a sending_access key; a full_access key manages every domain")
		}
		ids, err := s.Svc.DomainMailboxes(ctx, key.Tenant, req.DomainID)
		if err != nil {
			return none, core.Errorf(core.CodeValidation, "domain_id", "domain %q does not exist", req.DomainID)
		}
		// A key limited to a domain is limited to the mailboxes at it (and
		// to those the creating key may use): sendonce authorizes a send
		// by its mailbox.
		ids = slices.DeleteFunc(ids, func(id string) bool { return !key.MayUseMailbox(id) })
		if len(ids) == 0 {
			return none, core.Errorf(core.CodeValidation, "domain_id",
				"domain %q has no mailbox this key may use: create one at it (POST /v1/mailboxes) first", req.DomainID)
		}
		p.Mailboxes = ids
	}
	return p, nil
}

type resendKeyView struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"` // sendonce does not record it
}

func (s *API) ListKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.Svc.TenantKeys(r.Context(), kit.APIKeyFrom(r.Context()).Tenant)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	out := kit.ResendList[resendKeyView]{Object: "list", Data: []resendKeyView{}}
	for _, k := range ks {
		out.Data = append(out.Data, resendKeyView{ID: k.ID, Name: k.Name, CreatedAt: kit.RFC3339(k.CreatedAt)})
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

func (s *API) RemoveKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.Svc.RevokeTenantKey(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, id)
	s.AnswerResend(w, r, kit.ResendDeleted{Object: "api_key", ID: id, Deleted: true}, err)
}
