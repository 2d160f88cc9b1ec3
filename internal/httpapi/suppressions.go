package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// suppressionView is the suppression object of /v1/suppressions.
type suppressionView struct {
	ID        string  `json:"id"`
	Object    string  `json:"object"`
	Email     string  `json:"email"`
	Reason    string  `json:"reason"`
	Origin    string  `json:"origin"`
	SendID    *string `json:"send_id"`
	CreatedAt string  `json:"created_at"`
}

func viewSuppression(s *core.Suppression) suppressionView {
	return suppressionView{ID: s.ID, Object: "suppression", Email: s.Address, Reason: s.Reason, Origin: s.Origin,
		SendID: kit.OptString(s.SendID), CreatedAt: kit.RFC3339(s.CreatedAt)}
}

// handleAddSuppression is POST /v1/suppressions (admin): 201 with the new
// entry, 200 with the existing one when the address was on the list.
func (s *Server) handleAddSuppression(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		Email  string `json:"email"`
		Reason string `json:"reason"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	sup, created, err := s.Svc.AddManualSuppression(ctx, tx, key.Tenant, req.Email, req.Reason)
	if err != nil {
		return 0, nil, err
	}
	if created {
		return http.StatusCreated, viewSuppression(sup), nil
	}
	return http.StatusOK, viewSuppression(sup), nil
}

func (s *Server) handleListSuppressions(w http.ResponseWriter, r *http.Request) {
	f, err := kit.SuppressionFilter(r)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	list, next, err := s.Reads.ListSuppressions(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, f)
	s.Answer(w, r, kit.ListView[suppressionView]{Object: "list", Data: kit.Views(list, viewSuppression), Next: kit.OptString(next)}, err)
}

func (s *Server) handleGetSuppression(w http.ResponseWriter, r *http.Request) {
	sup, err := s.Reads.Suppression(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("email"))
	s.Answer(w, r, kit.Shown(sup, err, viewSuppression), err)
}

// handleDeleteSuppression is DELETE /v1/suppressions/{email} (admin): the
// removed entry; 404 when there was none.
func (s *Server) handleDeleteSuppression(w http.ResponseWriter, r *http.Request) {
	sup, err := s.Svc.RemoveSuppression(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("email"))
	s.Answer(w, r, kit.Shown(sup, err, viewSuppression), err)
}

// unmatchedView is one unmatched inbound item; raw is at /raw.
type unmatchedView struct {
	ID         string  `json:"id"`
	Object     string  `json:"object"`
	SendID     *string `json:"send_id"`
	MailFrom   string  `json:"mail_from"`
	RcptTo     string  `json:"rcpt_to"`
	Reason     string  `json:"reason"`
	Size       int     `json:"size"`
	ReceivedAt string  `json:"received_at"`
}

// handleListUnmatched is GET /v1/inbound/unmatched (admin): inbound mail
// the listener kept because it could not use it, newest first.
func (s *Server) handleListUnmatched(w http.ResponseWriter, r *http.Request) {
	writeLimitedList(s, w, r, s.Reads.ListUnmatched, func(u *core.UnmatchedInbound) unmatchedView {
		return unmatchedView{ID: u.ID, Object: "inbound_unmatched", SendID: kit.OptString(u.SendID),
			MailFrom: u.MailFrom, RcptTo: u.RcptTo, Reason: u.Reason, Size: u.Size, ReceivedAt: kit.RFC3339(u.ReceivedAt)}
	})
}

// handleDestinations lists the mx destinations this process delivered
// the key's tenant's sends to, each with its traffic shaping now:
// connections open and their limit, the rate, a pause and the codes of
// the reply that lowered them (docs/deliverability.md). Shaping is per
// process: a worker's own share.
func (s *Server) handleDestinations(w http.ResponseWriter, r *http.Request) {
	var data any = []any{}
	if s.Cfg.Destinations != nil {
		data = s.Cfg.Destinations(kit.APIKeyFrom(r.Context()).Tenant)
	}
	kit.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
