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
	m.HandleFunc("GET /readyz", s.handleReadyz)
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
	m.Handle("PATCH /v1/sends/{id}", s.auth(core.ScopeSend, s.idempotent(postOpts{audit: true}, inTx(s.handleReschedule))))
	m.Handle("POST /v1/sends/{id}/cancel", s.auth(core.ScopeSend, s.idempotent(postOpts{emptyBody: true, audit: true}, inTx(s.handleCancel))))
	m.Handle("POST /v1/sends/{id}/reconcile", s.auth(core.ScopeAdmin, s.idempotent(postOpts{}, inTx(s.handleReconcile))))
	m.Handle("POST /v1/sends/{id}/approve", s.auth(core.ScopeAdmin, s.idempotent(postOpts{emptyBody: true}, inTx(s.handleApprove))))
	m.Handle("POST /v1/sends/{id}/reject", s.auth(core.ScopeAdmin, s.idempotent(postOpts{emptyBody: true}, inTx(s.handleReject))))

	// Receiving (docs/receiving.md).
	m.Handle("GET /v1/received", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListReceived)))
	m.Handle("GET /v1/received/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetReceived)))
	m.Handle("GET /v1/received/{id}/raw", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetReceivedRaw)))
	m.Handle("GET /v1/received/{id}/attachments/{attachment}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetReceivedAttachment)))
	// Replies and forwards are sends: the key rule of POST /v1/send.
	m.Handle("POST /v1/received/{id}/reply", s.bounded(s.auth(core.ScopeSend, s.idempotent(postOpts{requireKey: s.cfg.RequireIdempotencyKey, committed: accepted, audit: true}, s.handleReplyReceived))))
	m.Handle("POST /v1/received/{id}/forward", s.bounded(s.auth(core.ScopeSend, s.idempotent(postOpts{requireKey: s.cfg.RequireIdempotencyKey, committed: accepted, audit: true}, s.handleForwardReceived))))
	m.Handle("GET /v1/threads", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListThreads)))
	m.Handle("GET /v1/threads/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetThread)))
	m.Handle("PATCH /v1/threads/{id}", s.auth(core.ScopeSend, http.HandlerFunc(s.handlePatchThread)))

	m.Handle("PUT /v1/templates/{id}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handlePutTemplate)))
	m.Handle("GET /v1/templates/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetTemplate)))
	m.Handle("GET /v1/templates", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListTemplates)))
	m.Handle("DELETE /v1/templates/{id}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteTemplate)))

	// Once committed, a mailbox with an imap URL starts its first sync at
	// once (app.Service.IMAPChanged).
	m.Handle("POST /v1/mailboxes", s.auth(core.ScopeAdmin, s.idempotent(postOpts{committed: s.svc.IMAPChanged}, inTx(s.handleCreateMailbox))))
	m.Handle("GET /v1/mailboxes/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetMailbox)))
	m.Handle("PUT /v1/mailboxes/{id}/imap", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleSetMailboxIMAP)))
	m.Handle("GET /v1/mailboxes", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListMailboxes)))
	// Receiving addresses (inboxes.go): the claim rule of Resend's POST /inboxes.
	m.Handle("POST /v1/inboxes", s.auth(core.ScopeAdmin, s.idempotent(postOpts{}, inTx(s.handleCreateInbox))))
	m.Handle("GET /v1/inboxes", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListInboxes)))
	m.Handle("GET /v1/inboxes/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetNativeInbox)))
	m.Handle("DELETE /v1/inboxes/{id}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteInbox)))

	m.Handle("POST /v1/domains", s.auth(core.ScopeAdmin, s.idempotent(postOpts{}, s.handleAddDomain)))
	m.Handle("GET /v1/domains", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListDomains)))
	m.Handle("GET /v1/domains/{domain}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetDomain)))
	m.Handle("DELETE /v1/domains/{domain}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteDomain)))
	m.Handle("GET /v1/domains/{domain}/check", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleCheckDomain)))

	m.Handle("POST /v1/suppressions", s.auth(core.ScopeAdmin, s.idempotent(postOpts{}, inTx(s.handleAddSuppression))))
	m.Handle("GET /v1/suppressions", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListSuppressions)))
	m.Handle("GET /v1/suppressions/{email}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetSuppression)))
	m.Handle("DELETE /v1/suppressions/{email}", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteSuppression)))
	m.Handle("GET /v1/inbound/unmatched", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleListUnmatched)))
	m.Handle("GET /v1/reputation", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetReputation)))
	m.Handle("POST /v1/reputation/resume", s.auth(core.ScopeAdmin, s.idempotent(postOpts{emptyBody: true}, inTx(s.handleResumeReputation))))
	m.Handle("GET /v1/admin/destinations", s.auth(core.ScopeAdmin, http.HandlerFunc(s.handleDestinations)))
	// Webhooks (section 10); the same handlers serve Resend's /webhooks
	// below, with its error bodies.
	m.Handle("POST /v1/webhooks", s.auth(core.ScopeAdmin, s.idempotent(postOpts{secret: true}, s.handleCreateWebhook(http.StatusCreated))))
	m.Handle("GET /v1/webhooks", s.auth(core.ScopeRead, s.handleListWebhooks(writeError)))
	m.Handle("GET /v1/webhooks/{id}", s.auth(core.ScopeRead, s.handleGetWebhook(writeError)))
	m.Handle("PATCH /v1/webhooks/{id}", s.auth(core.ScopeAdmin, s.handleUpdateWebhook(writeError)))
	m.Handle("DELETE /v1/webhooks/{id}", s.auth(core.ScopeAdmin, s.handleDeleteWebhook(writeError)))
	m.Handle("POST /v1/webhooks/{id}/signing-secret/rotate", s.auth(core.ScopeAdmin, s.idempotent(postOpts{emptyBody: true, secret: true}, inTx(s.handleRotateWebhook))))
	m.Handle("GET /v1/webhooks/{id}/events", s.auth(core.ScopeRead, s.handleListDeliveries(writeError)))
	m.Handle("GET /v1/webhooks/{id}/events/{event_id}", s.auth(core.ScopeRead, s.handleGetDelivery(writeError)))
	m.Handle("GET /v1/webhooks/{id}/events/{event_id}/attempts", s.auth(core.ScopeRead, s.handleListAttempts(writeError)))
	m.Handle("POST /v1/webhooks/{id}/events/{event_id}/replay", s.auth(core.ScopeAdmin, s.idempotent(postOpts{emptyBody: true}, inTx(s.handleReplayDelivery))))

	m.Handle("GET /v1/inbox", s.auth(core.ScopeRead, http.HandlerFunc(s.handleListInbox)))
	m.Handle("GET /v1/inbox/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetInbox)))
	m.Handle("GET /v1/inbox/{id}/raw", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetInboxRaw)))

	// Compatibility surfaces (docs/compatibility.md): Mailera's, whose
	// handlers are in mailera_*.go, then Resend's, in resend_*.go.
	statusCache := newStatusCache()
	m.Handle("POST /api/public/v1/mailboxes/{id}/send", s.bounded(s.auth(core.ScopeSend, s.idempotent(postOpts{committed: accepted, audit: true}, s.handleMailboxSend))))
	m.Handle("GET /api/public/v1/mailboxes/{id}/messages", s.auth(core.ScopeRead, http.HandlerFunc(s.handleMailboxMessages)))
	m.Handle("GET /api/public/v1/mailboxes/{id}/messages/{message}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleMailboxMessage)))
	m.Handle("GET /api/public/v1/sends/{id}", s.auth(core.ScopeRead, http.HandlerFunc(s.handleGetSend)))
	m.Handle("GET /api/public/v1/mailboxes/{id}/status", s.auth(core.ScopeRead, s.handleMailboxStatus(statusCache)))
	m.Handle("GET /v1/mailboxes/{id}/status", s.auth(core.ScopeRead, s.handleMailboxStatus(statusCache))) // the native name of the same check
	m.Handle("POST /emails", s.bounded(s.resendPost(s.handleResendSend)))
	m.Handle("POST /emails/batch", s.bounded(s.resendPost(s.handleResendBatch)))
	m.Handle("GET /emails", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendList)))
	m.Handle("GET /emails/{id}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGet)))
	m.Handle("PATCH /emails/{id}", s.resendAuth(core.ScopeSend, s.idempotent(s.resendOpts(postOpts{audit: true}), inTx(s.handleResendUpdate))))
	m.Handle("POST /emails/{id}/cancel", s.resendAuth(core.ScopeSend, s.idempotent(s.resendOpts(postOpts{emptyBody: true, audit: true}), inTx(s.handleResendCancel))))
	// Resend's management routes: admin scope to change, read to look
	// (so a sending_access key, scope send, gets 403 on all of them).
	// Resend's receiving and inbox routes (resend_receiving.go, resend_inboxes.go, resend_threads.go).
	m.Handle("GET /emails/receiving", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendListReceiving)))
	m.Handle("GET /emails/receiving/{id}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGetReceiving)))
	m.Handle("GET /emails/receiving/{id}/attachments", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendReceivingAttachments)))
	m.Handle("GET /emails/receiving/{id}/attachments/{attachment}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendReceivingAttachment)))
	m.HandleFunc("GET /emails/receiving/{id}/raw", s.handleDownloadReceived)
	m.HandleFunc("GET /emails/receiving/{id}/attachments/{attachment}/content", s.handleDownloadReceived)
	m.Handle("POST /inboxes", s.resendManage(postOpts{}, s.handleResendCreateInbox))
	m.Handle("GET /inboxes", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendListInboxes)))
	m.Handle("GET /inboxes/{inbox}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGetInbox)))
	m.Handle("PATCH /inboxes/{inbox}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendUpdateInbox)))
	m.Handle("DELETE /inboxes/{inbox}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendRemoveInbox)))
	m.Handle("GET /inboxes/{inbox}/threads", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendListThreads)))
	m.Handle("GET /inboxes/{inbox}/threads/search", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendListThreads)))
	m.Handle("GET /inboxes/{inbox}/threads/{thread}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGetThread)))
	m.Handle("PATCH /inboxes/{inbox}/threads/{thread}", s.resendAuth(core.ScopeSend, http.HandlerFunc(s.handleResendUpdateThread)))
	m.Handle("DELETE /inboxes/{inbox}/threads/{thread}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendRemoveThread)))
	m.Handle("GET /inboxes/{inbox}/threads/{thread}/emails", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendThreadEmails)))
	m.Handle("GET /inboxes/{inbox}/threads/{thread}/emails/{email}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendThreadEmail)))
	m.Handle("POST /inboxes/{inbox}/threads/{thread}/emails/{email}/reply", s.bounded(s.resendPost(s.handleResendReplyThreadEmail)))
	m.Handle("POST /inboxes/{inbox}/threads/{thread}/emails/{email}/forward", s.bounded(s.resendPost(s.handleResendForwardThreadEmail)))
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
	m.Handle("POST /suppressions", s.resendManage(postOpts{}, inTx(s.handleResendAddSuppression)))
	m.Handle("GET /suppressions", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendListSuppressions)))
	m.Handle("GET /suppressions/{id}", s.resendAuth(core.ScopeRead, http.HandlerFunc(s.handleResendGetSuppression)))
	m.Handle("DELETE /suppressions/{id}", s.resendAuth(core.ScopeAdmin, http.HandlerFunc(s.handleResendRemoveSuppression)))
	m.Handle("POST /suppressions/batch/add", s.resendManage(postOpts{}, inTx(s.handleResendBatchAddSuppressions)))
	m.Handle("POST /suppressions/batch/remove", s.resendManage(postOpts{}, inTx(s.handleResendBatchRemoveSuppressions)))
	m.Handle("POST /webhooks", s.resendManage(postOpts{secret: true}, s.handleCreateWebhook(http.StatusOK)))
	m.Handle("GET /webhooks", s.resendAuth(core.ScopeRead, s.handleListWebhooks(writeResendError)))
	m.Handle("GET /webhooks/{id}", s.resendAuth(core.ScopeRead, s.handleGetWebhook(writeResendError)))
	m.Handle("PATCH /webhooks/{id}", s.resendAuth(core.ScopeAdmin, s.handleUpdateWebhook(writeResendError)))
	m.Handle("DELETE /webhooks/{id}", s.resendAuth(core.ScopeAdmin, s.handleDeleteWebhook(writeResendError)))
	m.Handle("POST /webhooks/{id}/signing-secret/rotate", s.resendManage(postOpts{emptyBody: true, secret: true}, inTx(s.handleRotateWebhook)))
	m.Handle("GET /webhooks/{id}/events", s.resendAuth(core.ScopeRead, s.handleListDeliveries(writeResendError)))
	m.Handle("GET /webhooks/{id}/events/{event_id}", s.resendAuth(core.ScopeRead, s.handleGetDelivery(writeResendError)))
	m.Handle("GET /webhooks/{id}/events/{event_id}/attempts", s.resendAuth(core.ScopeRead, s.handleListAttempts(writeResendError)))
	m.Handle("POST /webhooks/{id}/events/{event_id}/replay", s.resendManage(postOpts{emptyBody: true}, inTx(s.handleReplayDelivery)))
	m.HandleFunc("GET /openapi.json", handleOpenAPI)
	// Public: the token in the path is the credential (unsubscribe.go).
	m.HandleFunc("GET /u/{token}", s.handleUnsubscribePage)
	m.HandleFunc("POST /u/{token}", s.handleUnsubscribe)
	// Authenticated by the provider's signature, not an API key.
	m.HandleFunc("POST /v1/providers/ses/events", s.handleSESEvents)
	m.HandleFunc("POST /v1/providers/resend/events", s.handleResendEvents)

	if s.cfg.Dashboard != nil {
		// Method-less: the dashboard answers its own methods, and its pages
		// are HTML, not API routes (docs/api.md, "The dashboard").
		m.Handle("/{$}", s.cfg.Dashboard)
		m.Handle("/ui/", s.cfg.Dashboard)
		m.Handle("/favicon.ico", s.cfg.Dashboard)
	}
	m.HandleFunc(notFoundPattern, s.handleNotFound)
	return m.patterns
}
