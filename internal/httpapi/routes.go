package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// notFoundPattern catches every /v1 path no route serves, so that even those
// answers have the API's error shape.
const notFoundPattern = "/v1/"

// routes is the whole API surface. It returns the registered patterns,
// which the OpenAPI test holds against openapi.json.
func (s *Server) routes() []string {
	m := &patternMux{ServeMux: s.mux}
	m.HandleFunc("GET /healthz", s.handleHealthz)
	if s.metrics != nil {
		m.Handle("GET /metrics", s.metrics.Handler())
	}

	accepted := func() {
		if s.metrics != nil {
			s.metrics.SendsAccepted.Inc()
		}
	}
	m.Handle("POST /v1/send", s.bounded(s.auth(core.ScopeSend, s.idempotent(postOpts{requireKey: s.cfg.RequireIdempotencyKey, committed: accepted, audit: true}, s.handleSend))))
	m.Handle("POST /v1/send/preview", s.bounded(s.auth(core.ScopeSend, http.HandlerFunc(s.handlePreviewSend))))
	m.Handle("GET /v1/audit", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleListAudit)))
	m.Handle("GET /v1/sends", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListSends)))
	m.Handle("GET /v1/sends/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetSend)))
	m.Handle("PATCH /v1/sends/{id}", s.auth(core.ScopeSend, s.idempotent(postOpts{}, inTx(s.handleReschedule))))
	m.Handle("POST /v1/sends/{id}/cancel", s.auth(core.ScopeSend, s.idempotent(postOpts{emptyBody: true}, inTx(s.handleCancel))))
	m.Handle("POST /v1/sends/{id}/reconcile", s.auth(core.ScopeAdmin, s.idempotent(postOpts{}, inTx(s.handleReconcile))))
	m.Handle("POST /v1/sends/{id}/approve", s.auth(core.ScopeAdmin, s.idempotent(postOpts{emptyBody: true}, inTx(s.handleApprove))))
	m.Handle("POST /v1/sends/{id}/reject", s.auth(core.ScopeAdmin, s.idempotent(postOpts{emptyBody: true}, inTx(s.handleReject))))

	m.Handle("PUT /v1/templates/{id}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handlePutTemplate)))
	m.Handle("GET /v1/templates/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetTemplate)))
	m.Handle("GET /v1/templates", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListTemplates)))
	m.Handle("DELETE /v1/templates/{id}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteTemplate)))

	m.Handle("POST /v1/mailboxes", s.auth(core.ScopeAdmin, s.idempotent(postOpts{}, inTx(s.handleCreateMailbox))))
	m.Handle("GET /v1/mailboxes/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetMailbox)))
	m.Handle("GET /v1/mailboxes", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListMailboxes)))

	m.Handle("POST /v1/domains", s.auth(core.ScopeAdmin, s.idempotent(postOpts{}, s.handleAddDomain)))
	m.Handle("GET /v1/domains", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListDomains)))
	m.Handle("GET /v1/domains/{domain}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetDomain)))
	m.Handle("DELETE /v1/domains/{domain}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteDomain)))
	m.Handle("GET /v1/domains/{domain}/check", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleCheckDomain)))

	m.Handle("GET /v1/inbox", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListInbox)))
	m.Handle("GET /v1/inbox/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetInbox)))
	m.Handle("GET /v1/inbox/{id}/raw", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetInboxRaw)))

	// Compatibility surfaces (API contract, section 7; docs/compatibility.md).
	statusCache := newStatusCache()
	m.Handle("POST /api/public/v1/mailboxes/{id}/send", s.bounded(s.auth(core.ScopeSend, s.idempotent(postOpts{committed: accepted, audit: true}, s.handleMailboxSend))))
	m.Handle("GET /api/public/v1/sends/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetSend)))
	m.Handle("GET /api/public/v1/mailboxes/{id}/status", s.auth(core.ScopeRead, s.handleMailboxStatus(statusCache)))
	m.Handle("POST /emails", s.bounded(s.resendPost(s.handleResendSend)))
	m.Handle("POST /emails/batch", s.bounded(s.resendPost(s.handleResendBatch)))
	m.Handle("GET /emails", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendList)))
	m.Handle("GET /emails/{id}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGet)))
	m.Handle("PATCH /emails/{id}", s.resendAuth(core.ScopeSend, s.idempotent(s.resendOpts(postOpts{}), inTx(s.handleResendUpdate))))
	m.Handle("POST /emails/{id}/cancel", s.resendAuth(core.ScopeSend, s.idempotent(s.resendOpts(postOpts{emptyBody: true}), inTx(s.handleResendCancel))))
	// Resend's management routes: admin scope to change, read to look
	// (so a sending_access key, scope send, gets 403 on all of them).
	m.Handle("POST /domains", s.resendManage(postOpts{}, s.handleResendCreateDomain))
	m.Handle("GET /domains", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendListDomains)))
	m.Handle("GET /domains/{id}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGetDomain)))
	m.Handle("PATCH /domains/{id}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendUpdateDomain)))
	m.Handle("DELETE /domains/{id}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendRemoveDomain)))
	m.Handle("POST /domains/{id}/verify", s.resendManage(postOpts{emptyBody: true}, s.handleResendVerifyDomain))
	m.Handle("POST /api-keys", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendCreateKey)))
	m.Handle("GET /api-keys", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendListKeys)))
	m.Handle("DELETE /api-keys/{id}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendRemoveKey)))
	m.Handle("POST /templates", s.resendManage(postOpts{}, inTx(s.handleResendCreateTemplate)))
	m.Handle("GET /templates", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendListTemplates)))
	m.Handle("GET /templates/{id}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGetTemplate)))
	m.Handle("PATCH /templates/{id}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendUpdateTemplate)))
	m.Handle("DELETE /templates/{id}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendRemoveTemplate)))
	m.Handle("POST /templates/{id}/publish", s.resendManage(postOpts{emptyBody: true}, inTx(s.handleResendPublishTemplate)))
	m.Handle("POST /templates/{id}/duplicate", s.resendManage(postOpts{emptyBody: true}, inTx(s.handleResendDuplicateTemplate)))
	m.HandleFunc("GET /openapi.json", handleOpenAPI)

	m.HandleFunc(notFoundPattern, s.handleNotFound)
	return m.patterns
}
