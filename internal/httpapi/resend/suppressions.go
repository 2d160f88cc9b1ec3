package resend

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// Resend's /suppressions, as its Node SDK (6.38) calls them.

type resendSuppression struct {
	Object    string  `json:"object,omitempty"`
	ID        string  `json:"id"`
	Email     string  `json:"email"`
	Origin    string  `json:"origin"`
	SourceID  *string `json:"source_id"`
	CreatedAt string  `json:"created_at"`
}

func viewResendSuppression(s *core.Suppression, object string) resendSuppression {
	return resendSuppression{Object: object, ID: s.ID, Email: s.Address, Origin: s.Origin, SourceID: kit.OptString(s.SendID),
		CreatedAt: kit.RFC3339(s.CreatedAt)}
}

// maxSuppressionBatch bounds one batch add or remove.
const maxSuppressionBatch = 100

func (s *API) AddSuppression(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		Email string `json:"email"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	sup, _, err := s.Svc.AddManualSuppression(ctx, tx, key.Tenant, req.Email, "")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, resendRef{Object: "suppression", ID: sup.ID}, nil
}

func (s *API) BatchAddSuppressions(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		Emails []string `json:"emails"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	if len(req.Emails) == 0 || len(req.Emails) > maxSuppressionBatch {
		return 0, nil, core.Errorf(core.CodeValidation, "emails", "emails: 1 to %d addresses", maxSuppressionBatch)
	}
	out := struct {
		Data []resendRef `json:"data"`
	}{Data: []resendRef{}}
	for _, e := range req.Emails {
		sup, _, err := s.Svc.AddManualSuppression(ctx, tx, key.Tenant, e, "")
		if err != nil {
			return 0, nil, err // the whole batch or nothing
		}
		out.Data = append(out.Data, resendRef{Object: "suppression", ID: sup.ID})
	}
	return http.StatusCreated, out, nil
}

func (s *API) BatchRemoveSuppressions(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		Emails []string `json:"emails"`
		IDs    []string `json:"ids"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	items := append(req.Emails, req.IDs...)
	if len(items) == 0 || len(items) > maxSuppressionBatch || (len(req.Emails) > 0 && len(req.IDs) > 0) {
		return 0, nil, core.Errorf(core.CodeValidation, "emails", "give emails or ids: 1 to %d of them", maxSuppressionBatch)
	}
	out := struct {
		Data []kit.ResendDeleted `json:"data"`
	}{Data: []kit.ResendDeleted{}}
	for _, it := range items {
		sup, err := s.Svc.RemoveSuppressionTx(ctx, tx, key.Tenant, it)
		switch {
		case err == nil:
			out.Data = append(out.Data, kit.ResendDeleted{Object: "suppression", ID: sup.ID, Deleted: true})
		case core.ErrorCode(err) == core.CodeNotFound:
			out.Data = append(out.Data, kit.ResendDeleted{Object: "suppression", ID: it, Deleted: false})
		default:
			return 0, nil, err
		}
	}
	return http.StatusOK, out, nil
}

func (s *API) ListSuppressions(w http.ResponseWriter, r *http.Request) {
	f, err := kit.SuppressionFilter(r)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	list, next, err := s.Reads.ListSuppressions(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, f)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	out := kit.ResendList[resendSuppression]{Object: "list", HasMore: next != "", Data: make([]resendSuppression, 0, len(list))}
	for _, sup := range list {
		out.Data = append(out.Data, viewResendSuppression(sup, ""))
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

func (s *API) GetSuppression(w http.ResponseWriter, r *http.Request) {
	sup, err := s.Reads.Suppression(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, viewResendSuppression(sup, "suppression"))
}

func (s *API) RemoveSuppression(w http.ResponseWriter, r *http.Request) {
	sup, err := s.Svc.RemoveSuppression(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ResendDeleted{Object: "suppression", ID: sup.ID, Deleted: true})
}
