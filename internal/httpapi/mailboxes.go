package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The native mailbox and inbox routes, /v1/mailboxes and /v1/inbox.

func (s *Server) handleCreateMailbox(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		ID          string `json:"id"`
		Address     string `json:"address"`
		Name        string `json:"name"`
		Transport   string `json:"transport"`
		ReceiveOnly bool   `json:"receive_only"`
		Receiving   bool   `json:"receiving"`
		IMAP        string `json:"imap"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	m := &core.Mailbox{Tenant: key.Tenant, ID: req.ID, Address: req.Address, Name: req.Name, Transport: req.Transport, ReceiveOnly: req.ReceiveOnly}
	if req.IMAP != "" {
		if err := s.Svc.ConnectIMAP(m, req.IMAP); err != nil {
			return 0, nil, err
		}
	}
	if err := s.Svc.CreateMailbox(ctx, tx, m); err != nil {
		return 0, nil, err
	}
	if req.Receiving || req.ReceiveOnly {
		if err := s.Svc.MarkReceiving(ctx, tx, m); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusCreated, kit.ViewMailbox(m), nil
}

// handleSetMailboxIMAP replaces a mailbox's imap URL ("" disconnects
// it). A PUT is idempotent by itself, as a template's.
func (s *Server) handleSetMailboxIMAP(w http.ResponseWriter, r *http.Request) {
	body, err := s.ReadBody(w, r)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	var req struct {
		IMAP string `json:"imap"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	m, err := s.Svc.SetMailboxIMAPAs(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"), req.IMAP)
	s.Answer(w, r, kit.Shown(m, err, kit.ViewMailbox), err)
}

func (s *Server) handleGetMailbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.Svc.MailboxAs(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	s.Answer(w, r, kit.Shown(m, err, kit.ViewMailbox), err)
}

// handleListMailboxes lists the mailboxes the key may use.
func (s *Server) handleListMailboxes(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	tenant := key.Tenant
	ms, err := s.Reads.ListMailboxes(r.Context(), tenant)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	def, err := s.Svc.Mailbox(r.Context(), tenant, core.DefaultMailboxID)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	out := kit.ListView[kit.MailboxView]{Object: "list", Data: []kit.MailboxView{}}
	if key.MayUseMailbox(def.ID) {
		out.Data = append(out.Data, kit.ViewMailbox(def))
	}
	for _, m := range ms {
		if err := s.Svc.OpenTransport(m); err != nil {
			kit.WriteError(w, r, s.Logger, err)
			return
		}
		if m.ID != core.DefaultMailboxID && key.MayUseMailbox(m.ID) {
			out.Data = append(out.Data, kit.ViewMailbox(m))
		}
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleListInbox(w http.ResponseWriter, r *http.Request) {
	writeLimitedList(s, w, r, s.Reads.ListInbox, func(m *core.InboxMessage) kit.InboxView { return kit.ViewInbox(m, false) })
}

// writeLimitedList answers a native list of the key's tenant's items, at
// most ?limit= of them: list reads them, view shows each, and an empty
// list is [] (the inbox and the unmatched mail are listed alike).
func writeLimitedList[T, V any](s *Server, w http.ResponseWriter, r *http.Request,
	list func(ctx context.Context, tenant string, limit int) ([]T, error), view func(T) V) {
	limit, err := kit.ParseLimit(r.URL.Query().Get("limit"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	items, err := list(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, limit)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ListView[V]{Object: "list", Data: kit.Views(items, view)})
}

func (s *Server) handleGetInbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.Reads.InboxMessage(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ViewInbox(m, true))
}

func (s *Server) handleGetInboxRaw(w http.ResponseWriter, r *http.Request) {
	m, err := s.Reads.InboxMessage(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteRaw(w, http.StatusOK, "message/rfc822", m.Raw)
}
