package resend

import (
	"context"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
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
	DMARCReports     bool    `json:"dmarc_reports"`
}

func (s *API) viewInbox(ctx context.Context, key *core.APIKey, in *app.Inbox) (resendInboxView, error) {
	m := in.Mailbox
	domain := m.Address[strings.LastIndexByte(m.Address, '@')+1:]
	v := resendInboxView{Object: "inbox", ID: m.ID, Name: m.Name, EmailAddress: m.Address, DomainID: domain,
		CreatedAt: kit.RFC3339(m.CreatedAt), UpdatedAt: kit.RFC3339(m.CreatedAt), DMARCReports: in.DMARCReports, Quarantine: m.QuarantineRule()}
	if m.Name != "" {
		v.FromName = &m.Name
	}
	ts, _, err := s.Svc.ListThreads(ctx, key, core.ThreadFilter{MailboxIDs: []string{m.ID}, Limit: 100})
	if err != nil {
		return v, err
	}
	for i, t := range ts {
		v.Unread += t.Unread
		if i == 0 {
			last := kit.RFC3339(t.LastAt)
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
	// DMARCReports makes the inbox a DMARC report address (dmarc.go).
	DMARCReports bool `json:"dmarc_reports"`
	// Quarantine is sendonce's rule (docs/agents.md, "Quarantine").
	Quarantine string `json:"quarantine"`
}

func (s *API) CreateInbox(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	var req resendCreateInbox
	if err := kit.DecodeStrict(body, &req); err != nil {
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
		m, err := s.Svc.CreateInbox(ctx, tx, key.Tenant, req.EmailAddress, name)
		if err == nil && req.DMARCReports {
			err = s.Svc.SetDMARCReports(ctx, tx, key.Tenant, m.ID, true)
		}
		if err != nil {
			return 0, nil, err
		}
		if err := s.Svc.SetInboxQuarantine(ctx, tx, key.Tenant, m.ID, req.Quarantine); err != nil {
			return 0, nil, err
		}
		warning := s.Svc.ReceivingWarning()
		if warning != "" {
			s.Logger.WarnContext(ctx, "receiving address made without an inbound listener", "inbox", m.ID)
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

func (s *API) ListInboxes(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	ins, err := s.Svc.ListInboxes(r.Context(), key)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	out := kit.ResendList[resendInboxView]{Object: "list", Data: []resendInboxView{}}
	for i := range ins {
		v, err := s.viewInbox(r.Context(), key, &ins[i])
		if err != nil {
			kit.WriteResendError(w, r, s.Logger, err)
			return
		}
		out.Data = append(out.Data, v)
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

// inbox resolves the {inbox} path value: an id or an address.
func (s *API) inbox(r *http.Request) (*core.APIKey, *app.Inbox, error) {
	key := kit.APIKeyFrom(r.Context())
	in, err := s.Svc.InboxByRef(r.Context(), key, r.PathValue("inbox"))
	return key, in, err
}

// inInbox reads, with read, what the path names by param inside the
// path's inbox {inbox}: one of another mailbox (mailboxOf) is, here, one
// that does not exist.
func inInbox[T any](s *API, r *http.Request, param string, read func(context.Context, *core.APIKey, string) (T, error),
	mailboxOf func(T) string) (*core.APIKey, T, error) {
	var none T
	key, in, err := s.inbox(r)
	if err != nil {
		return nil, none, err
	}
	v, err := read(r.Context(), key, r.PathValue(param))
	if err != nil {
		return nil, none, err
	}
	if mailboxOf(v) != in.Mailbox.ID {
		return nil, none, core.ErrNotFound
	}
	return key, v, nil
}

func (s *API) GetInbox(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	if err == nil {
		var v resendInboxView
		if v, err = s.viewInbox(r.Context(), key, in); err == nil {
			kit.WriteJSON(w, http.StatusOK, v)
			return
		}
	}
	kit.WriteResendError(w, r, s.Logger, err)
}

func (s *API) UpdateInbox(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	var req struct {
		Name         *string `json:"name"`
		FromName     *string `json:"from_name"`
		DMARCReports *bool   `json:"dmarc_reports"`
		Quarantine   *string `json:"quarantine"`
	}
	body, err := s.ReadBody(w, r)
	if err == nil {
		err = kit.DecodeStrict(body, &req)
	}
	if err == nil && req.Quarantine != nil {
		_, err = app.ParseQuarantineRule(*req.Quarantine) // before any change is made
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	name := req.Name
	if name == nil {
		name = req.FromName
	}
	if name != nil {
		if err := s.Svc.RenameInbox(r.Context(), key, in.Mailbox.ID, *name); err != nil {
			kit.WriteResendError(w, r, s.Logger, err)
			return
		}
	}
	if req.DMARCReports != nil {
		if err := s.Svc.UpdateInboxDMARC(r.Context(), key, in.Mailbox.ID, *req.DMARCReports); err != nil {
			kit.WriteResendError(w, r, s.Logger, err)
			return
		}
	}
	if req.Quarantine != nil {
		if err := s.Svc.ChangeInboxQuarantine(r.Context(), key, in.Mailbox.ID, *req.Quarantine); err != nil {
			kit.WriteResendError(w, r, s.Logger, err)
			return
		}
	}
	kit.WriteJSON(w, http.StatusOK, resendRef{Object: "inbox", ID: in.Mailbox.ID})
}

func (s *API) RemoveInbox(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	if err == nil {
		err = s.Svc.RemoveInbox(r.Context(), key, in.Mailbox.ID)
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ResendDeleted{Object: "inbox", ID: in.Mailbox.ID, Deleted: true})
}
