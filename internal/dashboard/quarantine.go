package dashboard

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// The quarantine page (admin): received mail an inbox's rule kept from
// agents (docs/agents.md, "Quarantine"), to release into the inbox or
// delete. It reads and changes through the same app use cases as
// GET /v1/received?folder=quarantine, POST /v1/received/{id}/release and
// DELETE /v1/received/{id}, so an agent key's session (admin or not) is
// refused there as on the API.

type quarantineData struct {
	Messages []*core.ReceivedMessage
	Next     string
	// Done says what the last button did ("released", "deleted").
	Done, DoneID string
}

// quarantine lists the quarantined messages, newest first: metadata, the
// authentication verdicts and a preview, never a body inline.
func (d *Dashboard) quarantine(q *req) error {
	v := q.r.URL.Query()
	ms, more, err := d.svc.ListReceived(q.ctx(), q.key, core.ReceivedFilter{Folder: core.FolderQuarantine,
		Limit: pageSize, After: v.Get("after")})
	if err != nil {
		return err
	}
	data := quarantineData{Messages: ms, Done: v.Get("done"), DoneID: v.Get("id")}
	if data.Done != "released" && data.Done != "deleted" {
		data.Done, data.DoneID = "", ""
	}
	if more {
		data.Next = ms[len(ms)-1].ID
	}
	return d.render(q, 0, "quarantine", "Quarantine", data)
}

// releaseQuarantined moves one message into the inbox (its thread).
func (d *Dashboard) releaseQuarantined(q *req) error {
	m, err := d.svc.ReleaseQuarantined(q.ctx(), q.key, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/quarantine?done=released&id="+m.ID, http.StatusSeeOther)
	return nil
}

// deleteQuarantined deletes one quarantined message. Only a quarantined
// one: this page must not become a way to delete the inbox's mail.
func (d *Dashboard) deleteQuarantined(q *req) error {
	id := q.r.PathValue("id")
	m, err := d.svc.ReceivedMessage(q.ctx(), q.key, id)
	if err != nil {
		return err
	}
	if m.Folder != core.FolderQuarantine {
		return core.Errorf(core.CodeInvalidState, "id", "the message is no longer in the quarantine")
	}
	if err := d.svc.DeleteReceived(q.ctx(), q.key, id); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/quarantine?done=deleted&id="+id, http.StatusSeeOther)
	return nil
}
