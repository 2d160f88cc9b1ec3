package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// Resend's Inboxes routes (inboxes.*, inboxes.threads.*,
// inboxes.threads.emails.*): an inbox is a mailbox that receives; drafts,
// labels as objects and the inbox agent are not built (docs/compatibility.md).

type resendInboxView struct {
	Object           string  `json:"object"`
	ID               string  `json:"id"`
	Name             string  `json:"name"`
	EmailAddress     string  `json:"email_address"`
	DomainID         string  `json:"domain_id"`
	ReceivingAddress *string `json:"receiving_address"`
	FromName         *string `json:"from_name"`
	Unread           int     `json:"unread"`
	Drafts           int     `json:"drafts"`
	LastReceived     *string `json:"last_received"`
	Quarantine       string  `json:"quarantine"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
}

func (s *Server) viewInbox(ctx context.Context, key *core.APIKey, in *app.Inbox) (resendInboxView, error) {
	m := in.Mailbox
	domain := m.Address[strings.LastIndexByte(m.Address, '@')+1:]
	v := resendInboxView{Object: "inbox", ID: m.ID, Name: m.Name, EmailAddress: m.Address, DomainID: domain,
		CreatedAt: rfc3339(m.CreatedAt), UpdatedAt: rfc3339(m.CreatedAt), Quarantine: m.QuarantineRule()}
	if m.Name != "" {
		v.FromName = &m.Name
	}
	ts, _, err := s.svc.ListThreads(ctx, key, core.ThreadFilter{MailboxIDs: []string{m.ID}, Limit: 100})
	if err != nil {
		return v, err
	}
	for i, t := range ts {
		v.Unread += t.Unread
		if i == 0 {
			last := rfc3339(t.LastAt)
			v.LastReceived = &last
		}
	}
	return v, nil
}

type resendCreateInbox struct {
	EmailAddress string `json:"email_address"`
	Name         string `json:"name"`
	Forwarding   *bool  `json:"forwarding"`
	FromName     string `json:"from_name"`
	// Quarantine is sendonce's rule (docs/agents.md, "Quarantine").
	Quarantine string `json:"quarantine"`
}

func (s *Server) handleResendCreateInbox(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (writeStep, error) {
	var req resendCreateInbox
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.EmailAddress == "" {
		return nil, core.Errorf(core.CodeValidation, "email_address", "email_address is required")
	}
	name := req.Name
	if name == "" {
		name = req.FromName
	}
	if _, err := app.ParseQuarantineRule(req.Quarantine); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		m, err := s.svc.CreateInbox(ctx, tx, key.Tenant, req.EmailAddress, name)
		if err != nil {
			return 0, nil, err
		}
		if err := s.svc.SetInboxQuarantine(ctx, tx, key.Tenant, m.ID, req.Quarantine); err != nil {
			return 0, nil, err
		}
		warning := s.svc.ReceivingWarning()
		if warning != "" {
			s.logger.WarnContext(ctx, "receiving address made without an inbound listener", "inbox", m.ID)
		}
		return http.StatusCreated, createdInbox{resendRef: resendRef{Object: "inbox", ID: m.ID}, Warning: warning}, nil
	}, nil
}

// createdInbox is Resend's answer to a new inbox, and a warning when mail
// for it may never arrive (app.Service.ReceivingWarning).
type createdInbox struct {
	resendRef
	Warning string `json:"warning,omitempty"`
}

func (s *Server) handleResendListInboxes(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	ins, err := s.svc.ListInboxes(r.Context(), key)
	if err != nil {
		writeResendError(w, r, s.logger, err)
		return
	}
	out := resendList[resendInboxView]{Object: "list", Data: []resendInboxView{}}
	for i := range ins {
		v, err := s.viewInbox(r.Context(), key, &ins[i])
		if err != nil {
			writeResendError(w, r, s.logger, err)
			return
		}
		out.Data = append(out.Data, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// inbox resolves the {inbox} path value: an id or an address.
func (s *Server) inbox(r *http.Request) (*core.APIKey, *app.Inbox, error) {
	key := apiKeyFrom(r.Context())
	in, err := s.svc.InboxByRef(r.Context(), key, r.PathValue("inbox"))
	return key, in, err
}

func (s *Server) handleResendGetInbox(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	if err == nil {
		var v resendInboxView
		if v, err = s.viewInbox(r.Context(), key, in); err == nil {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	writeResendError(w, r, s.logger, err)
}

func (s *Server) handleResendUpdateInbox(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	if err != nil {
		writeResendError(w, r, s.logger, err)
		return
	}
	var req struct {
		Name       *string `json:"name"`
		FromName   *string `json:"from_name"`
		Quarantine *string `json:"quarantine"`
	}
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil && req.Quarantine != nil {
		_, err = app.ParseQuarantineRule(*req.Quarantine) // before any change is made
	}
	if err != nil {
		writeResendError(w, r, s.logger, err)
		return
	}
	name := req.Name
	if name == nil {
		name = req.FromName
	}
	if name != nil {
		if err := s.svc.RenameInbox(r.Context(), key, in.Mailbox.ID, *name); err != nil {
			writeResendError(w, r, s.logger, err)
			return
		}
	}
	if req.Quarantine != nil {
		if err := s.svc.ChangeInboxQuarantine(r.Context(), key, in.Mailbox.ID, *req.Quarantine); err != nil {
			writeResendError(w, r, s.logger, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, resendRef{Object: "inbox", ID: in.Mailbox.ID})
}

func (s *Server) handleResendRemoveInbox(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	if err == nil {
		err = s.svc.RemoveInbox(r.Context(), key, in.Mailbox.ID)
	}
	if err != nil {
		writeResendError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, resendDeleted{Object: "inbox", ID: in.Mailbox.ID, Deleted: true})
}
