package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The native inbox routes: an inbox is a mailbox that receives at an
// address on one of the tenant's domains (docs/receiving.md). They share
// app's one claim rule with Resend's POST /inboxes and mailboxes marked
// receiving.

// nativeInboxView is an inbox as the native API shows it.
type nativeInboxView struct {
	ID        string   `json:"id"`
	Object    string   `json:"object"`
	Address   string   `json:"address"`
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	// Quarantine is the inbox's rule (docs/agents.md, "Quarantine").
	Quarantine string  `json:"quarantine"`
	CreatedAt  *string `json:"created_at"`
	// DMARCReports: the inbox is a DMARC report address (dmarc.go).
	DMARCReports bool `json:"dmarc_reports"`
	// Warning says when mail for the inbox cannot arrive (no inbound
	// listener runs); only on the answer that made it.
	Warning string `json:"warning,omitempty"`
}

func viewNativeInbox(in *app.Inbox) nativeInboxView {
	m := in.Mailbox
	v := nativeInboxView{ID: m.ID, Object: "inbox", Address: m.Address, Name: m.Name, Addresses: in.Addresses,
		DMARCReports: in.DMARCReports, Quarantine: m.QuarantineRule()}
	if v.Addresses == nil {
		v.Addresses = []string{}
	}
	if !m.CreatedAt.IsZero() {
		v.CreatedAt = kit.OptTime(&m.CreatedAt)
	}
	return v
}

func (s *Server) handleCreateInbox(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		Address      string `json:"address"`
		Name         string `json:"name"`
		DMARCReports bool   `json:"dmarc_reports"`
		Quarantine   string `json:"quarantine"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	if req.Address == "" {
		return 0, nil, core.Errorf(core.CodeValidation, "address", "address is required")
	}
	if _, err := app.ParseQuarantineRule(req.Quarantine); err != nil {
		return 0, nil, err
	}
	m, err := s.Svc.CreateInbox(ctx, tx, key.Tenant, req.Address, req.Name)
	if err != nil {
		return 0, nil, renameField(err, "email_address", "address")
	}
	if req.DMARCReports {
		if err := s.Svc.SetDMARCReports(ctx, tx, key.Tenant, m.ID, true); err != nil {
			return 0, nil, err
		}
	}
	if err := s.Svc.SetInboxQuarantine(ctx, tx, key.Tenant, m.ID, req.Quarantine); err != nil {
		return 0, nil, err
	}
	m.Quarantine, _ = app.ParseQuarantineRule(req.Quarantine)
	v := viewNativeInbox(&app.Inbox{Mailbox: m, Addresses: []string{m.Address}, DMARCReports: req.DMARCReports})
	if v.Warning = s.Svc.ReceivingWarning(); v.Warning != "" {
		s.Logger.WarnContext(ctx, "receiving address made without an inbound listener", "inbox", m.ID)
	}
	return http.StatusCreated, v, nil
}

// renameField gives a validation error the native route's field name
// where app names Resend's.
func renameField(err error, from, to string) error {
	var e *core.Error
	if errors.As(err, &e) && e.Param == from {
		return core.Errorf(e.Code, to, "%s", strings.ReplaceAll(e.Message, from, to))
	}
	return err
}

func (s *Server) handleListInboxes(w http.ResponseWriter, r *http.Request) {
	ins, err := s.Svc.ListInboxes(r.Context(), kit.APIKeyFrom(r.Context()))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	out := kit.ListView[nativeInboxView]{Object: "list", Data: []nativeInboxView{}}
	for i := range ins {
		out.Data = append(out.Data, viewNativeInbox(&ins[i]))
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetNativeInbox(w http.ResponseWriter, r *http.Request) {
	in, err := s.Svc.InboxByRef(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	s.Answer(w, r, kit.Shown(in, err, viewNativeInbox), err)
}

func (s *Server) handleDeleteInbox(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	in, err := s.Svc.InboxByRef(r.Context(), key, r.PathValue("id"))
	if err == nil {
		err = s.Svc.RemoveInbox(r.Context(), key, in.Mailbox.ID)
	}
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, map[string]any{"id": in.Mailbox.ID, "object": "inbox", "deleted": true})
}
