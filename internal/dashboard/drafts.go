package dashboard

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// Drafts: what an agent (or anyone) wrote and left unsent, for a person
// to read, edit and send. Editing is app.Service.UpdateDraft; sending is
// app.Service.SendDraft, the protocol of every door, so that "send" here
// and an agent's send_draft are one email (docs/agents.md, "Drafts").

// maxDraftField bounds each field of the draft form.
const maxDraftField = 1 << 20

// draftRow is a draft as the pages show it.
type draftRow struct {
	D       *core.Draft
	Req     *app.SendRequest
	To, Cc  string
	CanEdit bool
	Saved   bool
}

func (d *Dashboard) draftRow(q *req, dr *core.Draft) (draftRow, error) {
	r, err := app.DraftSendRequest(dr)
	if err != nil {
		return draftRow{}, err
	}
	return draftRow{D: dr, Req: r, To: strings.Join(r.To, ", "), Cc: strings.Join(r.Cc, ", "),
		CanEdit: dr.SendID == "" && q.key.Has(core.ScopeSend)}, nil
}

func (d *Dashboard) drafts(q *req) error {
	ds, more, err := d.svc.ListDrafts(q.ctx(), q.key, "", 50, q.r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	data := struct {
		Rows []draftRow
		Next string
	}{}
	for _, dr := range ds {
		row, err := d.draftRow(q, dr)
		if err != nil {
			return err
		}
		data.Rows = append(data.Rows, row)
	}
	if more {
		data.Next = ds[len(ds)-1].ID
	}
	return d.render(q, 0, "drafts", "Drafts", data)
}

func (d *Dashboard) draft(q *req) error {
	dr, err := d.svc.Draft(q.ctx(), q.key, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	row, err := d.draftRow(q, dr)
	if err != nil {
		return err
	}
	row.Saved = q.r.URL.Query().Get("saved") == "1"
	return d.render(q, 0, "draft", "Draft "+dr.ID, row)
}

// formAddresses reads a comma-separated address field.
func formAddresses(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// saveDraft stores the form's recipients, subject, text and HTML; the
// draft's other fields stay as they are.
func (d *Dashboard) saveDraft(q *req) error {
	f := map[string]string{}
	for _, n := range []string{"to", "cc", "subject", "text", "html"} {
		v := q.r.PostFormValue(n)
		if len(v) > maxDraftField {
			return core.Errorf(core.CodeValidation, n, "%s is longer than %d bytes", n, maxDraftField)
		}
		f[n] = v
	}
	id := q.r.PathValue("id")
	_, err := d.svc.UpdateDraft(q.ctx(), q.key, id, func(r *app.SendRequest) error {
		r.To, r.Cc = formAddresses(f["to"]), formAddresses(f["cc"])
		r.Subject, r.Text, r.HTML = f["subject"], f["text"], f["html"]
		return nil
	})
	if err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/drafts/"+id+"?saved=1", http.StatusSeeOther)
	return nil
}

// sendDraft sends the draft once, under its own key: a double click, a
// second tab, or an agent's send_draft at the same moment is one email,
// and every one of them is shown that send.
func (d *Dashboard) sendDraft(q *req) error {
	ctx, id := q.ctx(), q.r.PathValue("id")
	sent := d.svc.SendDraft(ctx, d.idem, q.key, id, app.Guarded(q.key, false), nil, nil)
	err := sent.Result.Err
	if err == nil && sent.SendID == "" {
		err = core.Errorf(core.CodeConflict, "", "this draft is still being sent: wait a moment and reload it")
	}
	d.auditDraftSend(ctx, q, app.DraftIdempotencyKey(id), sent, err)
	if err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/sends/"+sent.SendID, http.StatusSeeOther)
	return nil
}

// auditDraftSend writes the press to the audit log, as auditReply does a
// reply: mail going out, and who sent it from the dashboard is asked later.
func (d *Dashboard) auditDraftSend(ctx context.Context, q *req, idemKey string, sent app.DraftSent, err error) {
	e := &core.AuditEntry{Tenant: q.key.Tenant, APIKeyID: q.key.ID, Route: "POST /ui/drafts/{id}/send",
		IdempotencyKey: idemKey, Status: http.StatusSeeOther, SendID: sent.SendID, Outcome: "created"}
	switch {
	case err != nil:
		e.Outcome, e.Status, e.Code, e.Detail = "refused", http.StatusBadRequest, core.ErrorCode(err), err.Error()
		if core.ErrorCode(err) == core.CodeInternal {
			e.Outcome = "error"
		}
	case sent.Result.Outcome == idempotency.Replay:
		e.Outcome = "replayed"
	}
	ctx = context.WithoutCancel(ctx)
	if err := d.svc.RecordAudit(ctx, e); err != nil {
		d.log.ErrorContext(ctx, "write audit entry", slog.Any("error", err))
	}
}
