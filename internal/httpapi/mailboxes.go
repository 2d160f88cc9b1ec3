package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
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
	if err := DecodeStrict(body, &req); err != nil {
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
	return http.StatusCreated, ViewMailbox(m), nil
}

// handleSetMailboxIMAP replaces a mailbox's imap URL ("" disconnects
// it). A PUT is idempotent by itself, as a template's.
func (s *Server) handleSetMailboxIMAP(w http.ResponseWriter, r *http.Request) {
	body, err := s.ReadBody(w, r)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	var req struct {
		IMAP string `json:"imap"`
	}
	if err := DecodeStrict(body, &req); err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	m, err := s.Svc.SetMailboxIMAPAs(r.Context(), APIKeyFrom(r.Context()), r.PathValue("id"), req.IMAP)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, ViewMailbox(m))
}

func (s *Server) handleGetMailbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.Svc.MailboxAs(r.Context(), APIKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, ViewMailbox(m))
}

// handleListMailboxes lists the mailboxes the key may use.
func (s *Server) handleListMailboxes(w http.ResponseWriter, r *http.Request) {
	key := APIKeyFrom(r.Context())
	tenant := key.Tenant
	ms, err := s.Reads.ListMailboxes(r.Context(), tenant)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	def, err := s.Svc.Mailbox(r.Context(), tenant, core.DefaultMailboxID)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	out := ListView[MailboxView]{Object: "list", Data: []MailboxView{}}
	if key.MayUseMailbox(def.ID) {
		out.Data = append(out.Data, ViewMailbox(def))
	}
	for _, m := range ms {
		if err := s.Svc.OpenTransport(m); err != nil {
			WriteError(w, r, s.Logger, err)
			return
		}
		if m.ID != core.DefaultMailboxID && key.MayUseMailbox(m.ID) {
			out.Data = append(out.Data, ViewMailbox(m))
		}
	}
	WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleListInbox(w http.ResponseWriter, r *http.Request) {
	limit, err := ParseLimit(r.URL.Query().Get("limit"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	ms, err := s.Reads.ListInbox(r.Context(), APIKeyFrom(r.Context()).Tenant, limit)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	out := ListView[InboxView]{Object: "list", Data: []InboxView{}}
	for _, m := range ms {
		out.Data = append(out.Data, ViewInbox(m, false))
	}
	WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetInbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.Reads.InboxMessage(r.Context(), APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, ViewInbox(m, true))
}

func (s *Server) handleGetInboxRaw(w http.ResponseWriter, r *http.Request) {
	m, err := s.Reads.InboxMessage(r.Context(), APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteRaw(w, http.StatusOK, "message/rfc822", m.Raw)
}
