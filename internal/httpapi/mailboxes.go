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
	if err := decodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	m := &core.Mailbox{Tenant: key.Tenant, ID: req.ID, Address: req.Address, Name: req.Name, Transport: req.Transport, ReceiveOnly: req.ReceiveOnly}
	if req.IMAP != "" {
		if err := s.svc.ConnectIMAP(m, req.IMAP); err != nil {
			return 0, nil, err
		}
	}
	if err := s.svc.CreateMailbox(ctx, tx, m); err != nil {
		return 0, nil, err
	}
	if req.Receiving || req.ReceiveOnly {
		if err := s.svc.MarkReceiving(ctx, tx, m); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusCreated, viewMailbox(m), nil
}

// handleSetMailboxIMAP replaces a mailbox's imap URL ("" disconnects
// it). A PUT is idempotent by itself, as a template's.
func (s *Server) handleSetMailboxIMAP(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	var req struct {
		IMAP string `json:"imap"`
	}
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	m, err := s.svc.SetMailboxIMAPAs(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"), req.IMAP)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewMailbox(m))
}

func (s *Server) handleGetMailbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.svc.MailboxAs(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewMailbox(m))
}

// handleListMailboxes lists the mailboxes the key may use.
func (s *Server) handleListMailboxes(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	tenant := key.Tenant
	ms, err := s.reads.ListMailboxes(r.Context(), tenant)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	def, err := s.svc.Mailbox(r.Context(), tenant, core.DefaultMailboxID)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[mailboxView]{Object: "list", Data: []mailboxView{}}
	if key.MayUseMailbox(def.ID) {
		out.Data = append(out.Data, viewMailbox(def))
	}
	for _, m := range ms {
		if err := s.svc.OpenTransport(m); err != nil {
			writeError(w, r, s.logger, err)
			return
		}
		if m.ID != core.DefaultMailboxID && key.MayUseMailbox(m.ID) {
			out.Data = append(out.Data, viewMailbox(m))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleListInbox(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r.URL.Query().Get("limit"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	ms, err := s.reads.ListInbox(r.Context(), apiKeyFrom(r.Context()).Tenant, limit)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[inboxView]{Object: "list", Data: []inboxView{}}
	for _, m := range ms {
		out.Data = append(out.Data, viewInbox(m, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetInbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.reads.InboxMessage(r.Context(), apiKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewInbox(m, true))
}

func (s *Server) handleGetInboxRaw(w http.ResponseWriter, r *http.Request) {
	m, err := s.reads.InboxMessage(r.Context(), apiKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeRaw(w, http.StatusOK, "message/rfc822", m.Raw)
}
