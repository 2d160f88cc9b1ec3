package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The native template routes, /v1/templates.

func (s *Server) handlePutTemplate(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	body, err := s.ReadBody(w, r)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	var req struct {
		Subject string `json:"subject"`
		Text    string `json:"text"`
		HTML    string `json:"html"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	t := &core.Template{Tenant: key.Tenant, ID: r.PathValue("id"), Subject: req.Subject, Text: req.Text, HTML: req.HTML}
	created, err := s.Svc.SaveTemplate(r.Context(), t)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	stored, err := s.Reads.Template(r.Context(), key.Tenant, t.ID)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	kit.WriteJSON(w, status, kit.ViewTemplate(stored))
}

func (s *Server) handleGetTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.Reads.Template(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	s.Answer(w, r, kit.Shown(t, err, kit.ViewTemplate), err)
}

func (s *Server) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	ts, err := s.Reads.ListTemplates(r.Context(), kit.APIKeyFrom(r.Context()).Tenant)
	s.Answer(w, r, kit.ListView[kit.TemplateView]{Object: "list", Data: kit.Views(ts, kit.ViewTemplate)}, err)
}

func (s *Server) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	id := r.PathValue("id")
	err := s.Svc.DeleteTemplate(r.Context(), key.Tenant, id)
	s.Answer(w, r, map[string]any{"id": id, "object": "template", "deleted": true}, err)
}
