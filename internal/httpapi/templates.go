package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// The native template routes, /v1/templates.

func (s *Server) handlePutTemplate(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	var req struct {
		Subject string `json:"subject"`
		Text    string `json:"text"`
		HTML    string `json:"html"`
	}
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	t := &core.Template{Tenant: key.Tenant, ID: r.PathValue("id"), Subject: req.Subject, Text: req.Text, HTML: req.HTML}
	created, err := s.svc.SaveTemplate(r.Context(), t)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	stored, err := s.reads.Template(r.Context(), key.Tenant, t.ID)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, viewTemplate(stored))
}

func (s *Server) handleGetTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.reads.Template(r.Context(), apiKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewTemplate(t))
}

func (s *Server) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	ts, err := s.reads.ListTemplates(r.Context(), apiKeyFrom(r.Context()).Tenant)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[templateView]{Object: "list", Data: []templateView{}}
	for _, t := range ts {
		out.Data = append(out.Data, viewTemplate(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	id := r.PathValue("id")
	if err := s.svc.DeleteTemplate(r.Context(), key.Tenant, id); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "template", "deleted": true})
}
