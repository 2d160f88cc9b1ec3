package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/httpapi/mailera"
	"github.com/sendonce/sendonce/internal/httpapi/resend"
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
	if s.Metrics != nil {
		m.Handle("GET /metrics", s.Metrics.Handler())
	}

	accepted := func() {
		if s.Metrics != nil {
			s.Metrics.SendsAccepted.Inc()
		}
	}
	m.Handle("POST /v1/send", s.Bounded(s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{RequireKey: s.Cfg.RequireIdempotencyKey, Committed: accepted, Audit: true}, s.handleSend))))
	m.Handle("POST /v1/send/preview", s.Bounded(s.Auth(core.ScopeSend, http.HandlerFunc(s.handlePreviewSend))))
	m.Handle("GET /v1/audit", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleListAudit)))
	m.Handle("GET /v1/sends", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListSends)))
	m.Handle("GET /v1/sends/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetSend)))
	m.Handle("PATCH /v1/sends/{id}", s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{Audit: true}, kit.WholeTx(s.handleReschedule))))
	m.Handle("POST /v1/sends/{id}/cancel", s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{EmptyBody: true, Audit: true}, kit.WholeTx(s.handleCancel))))
	m.Handle("POST /v1/sends/{id}/reconcile", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{}, kit.WholeTx(s.handleReconcile))))
	m.Handle("POST /v1/sends/{id}/approve", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{EmptyBody: true}, kit.WholeTx(s.handleApprove))))
	m.Handle("POST /v1/sends/{id}/elicitation", s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{Audit: true}, kit.WholeTx(s.handleElicitation))))
	m.Handle("POST /v1/sends/{id}/reject", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{EmptyBody: true}, kit.WholeTx(s.handleReject))))

	// Receiving (docs/receiving.md).
	m.Handle("GET /v1/received", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListReceived)))
	m.Handle("GET /v1/received/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetReceived)))
	m.Handle("GET /v1/received/{id}/raw", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetReceivedRaw)))
	m.Handle("GET /v1/received/{id}/attachments/{attachment}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetReceivedAttachment)))
	// Replies and forwards are sends: the key rule of POST /v1/send.
	m.Handle("POST /v1/received/{id}/reply", s.Bounded(s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{RequireKey: s.Cfg.RequireIdempotencyKey, Committed: accepted, Audit: true}, s.handleReplyReceived))))
	m.Handle("POST /v1/received/{id}/forward", s.Bounded(s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{RequireKey: s.Cfg.RequireIdempotencyKey, Committed: accepted, Audit: true}, s.handleForwardReceived))))
	// Quarantine (quarantine.go): admins release or delete what an inbox's rule kept from agents.
	m.Handle("POST /v1/received/{id}/release", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{EmptyBody: true}, kit.WholeTx(s.handleReleaseReceived))))
	m.Handle("DELETE /v1/received/{id}", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteReceived)))
	// Drafts (drafts.go; sending one: kit/drafts_send.go, shared with Resend's).
	m.Handle("POST /v1/drafts", s.Bounded(s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{RequireKey: s.Cfg.RequireIdempotencyKey, Audit: true}, s.handleCreateDraft))))
	m.Handle("GET /v1/drafts", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListDrafts)))
	m.Handle("GET /v1/drafts/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetDraft)))
	m.Handle("PATCH /v1/drafts/{id}", s.Bounded(s.Auth(core.ScopeSend, http.HandlerFunc(s.handlePatchDraft))))
	m.Handle("DELETE /v1/drafts/{id}", s.Auth(core.ScopeSend, http.HandlerFunc(s.handleDeleteDraft)))
	m.Handle("POST /v1/drafts/{id}/send", s.Auth(core.ScopeSend, s.SendDraft(kit.PostOpts{Committed: accepted}, handleNativeDraftSend)))
	m.Handle("GET /v1/threads", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListThreads)))
	m.Handle("GET /v1/threads/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetThread)))
	m.Handle("PATCH /v1/threads/{id}", s.Auth(core.ScopeSend, http.HandlerFunc(s.handlePatchThread)))

	m.Handle("PUT /v1/templates/{id}", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handlePutTemplate)))
	m.Handle("GET /v1/templates/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetTemplate)))
	m.Handle("GET /v1/templates", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListTemplates)))
	m.Handle("DELETE /v1/templates/{id}", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteTemplate)))

	// Once committed, a mailbox with an imap URL starts its first sync at
	// once (app.Service.IMAPChanged).
	m.Handle("POST /v1/mailboxes", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{Committed: s.Svc.IMAPChanged}, kit.WholeTx(s.handleCreateMailbox))))
	m.Handle("GET /v1/mailboxes/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetMailbox)))
	m.Handle("PUT /v1/mailboxes/{id}/imap", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleSetMailboxIMAP)))
	m.Handle("GET /v1/mailboxes", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListMailboxes)))
	// Receiving addresses (inboxes.go): the claim rule of Resend's POST /inboxes.
	m.Handle("POST /v1/inboxes", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{}, kit.WholeTx(s.handleCreateInbox))))
	m.Handle("GET /v1/inboxes", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListInboxes)))
	m.Handle("GET /v1/inboxes/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetNativeInbox)))
	m.Handle("DELETE /v1/inboxes/{id}", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteInbox)))

	m.Handle("POST /v1/domains", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{}, s.handleAddDomain)))
	m.Handle("GET /v1/domains", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListDomains)))
	m.Handle("GET /v1/domains/{domain}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetDomain)))
	m.Handle("DELETE /v1/domains/{domain}", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteDomain)))
	m.Handle("GET /v1/domains/{domain}/check", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleCheckDomain)))
	m.Handle("POST /v1/domains/{domain}/dkim/rotate", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{EmptyBody: true}, s.handleRotateDKIM)))

	m.Handle("POST /v1/suppressions", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{}, kit.WholeTx(s.handleAddSuppression))))
	m.Handle("GET /v1/suppressions", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListSuppressions)))
	m.Handle("GET /v1/suppressions/{email}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetSuppression)))
	m.Handle("DELETE /v1/suppressions/{email}", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleDeleteSuppression)))
	// DMARC aggregate reports (dmarc.go).
	m.Handle("GET /v1/dmarc/reports", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListDMARCReports)))
	m.Handle("GET /v1/dmarc/reports/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetDMARCReport)))
	m.Handle("GET /v1/dmarc/summary", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleDMARCSummary)))
	m.Handle("GET /v1/inbound/unmatched", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleListUnmatched)))
	m.Handle("GET /v1/reputation", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetReputation)))
	m.Handle("POST /v1/reputation/resume", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{EmptyBody: true}, kit.WholeTx(s.handleResumeReputation))))
	m.Handle("GET /v1/admin/destinations", s.Auth(core.ScopeAdmin, http.HandlerFunc(s.handleDestinations)))
	// Webhooks (section 10); the same handlers serve Resend's /webhooks
	// below, with its error bodies.
	m.Handle("POST /v1/webhooks", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{Secret: true}, s.handleCreateWebhook(http.StatusCreated))))
	m.Handle("GET /v1/webhooks", s.Auth(core.ScopeRead, s.handleListWebhooks(s.Answer)))
	m.Handle("GET /v1/webhooks/{id}", s.Auth(core.ScopeRead, s.handleGetWebhook(s.Answer)))
	m.Handle("PATCH /v1/webhooks/{id}", s.Auth(core.ScopeAdmin, s.handleUpdateWebhook(s.Answer)))
	m.Handle("DELETE /v1/webhooks/{id}", s.Auth(core.ScopeAdmin, s.handleDeleteWebhook(s.Answer)))
	m.Handle("POST /v1/webhooks/{id}/signing-secret/rotate", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{EmptyBody: true, Secret: true}, kit.WholeTx(s.handleRotateWebhook))))
	m.Handle("GET /v1/webhooks/{id}/events", s.Auth(core.ScopeRead, s.handleListDeliveries(s.Answer)))
	m.Handle("GET /v1/webhooks/{id}/events/{event_id}", s.Auth(core.ScopeRead, s.handleGetDelivery(s.Answer)))
	m.Handle("GET /v1/webhooks/{id}/events/{event_id}/attempts", s.Auth(core.ScopeRead, s.handleListAttempts(s.Answer)))
	m.Handle("POST /v1/webhooks/{id}/events/{event_id}/replay", s.Auth(core.ScopeAdmin, s.Idempotent(kit.PostOpts{EmptyBody: true}, kit.WholeTx(s.handleReplayDelivery))))

	m.Handle("GET /v1/inbox", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleListInbox)))
	m.Handle("GET /v1/inbox/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetInbox)))
	m.Handle("GET /v1/inbox/{id}/raw", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetInboxRaw)))

	// Compatibility surfaces (docs/compatibility.md): Mailera's (package
	// mailera), then Resend's (package resend).
	rs := &resend.API{Base: s.Base}
	ml := &mailera.API{Base: s.Base}
	statusCache := mailera.NewStatusCache()
	m.Handle("POST /api/public/v1/mailboxes/{id}/send", s.Bounded(s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{Committed: accepted, Audit: true}, ml.Send))))
	m.Handle("GET /api/public/v1/mailboxes/{id}/messages", s.Auth(core.ScopeRead, http.HandlerFunc(ml.Messages)))
	m.Handle("GET /api/public/v1/mailboxes/{id}/messages/{message}", s.Auth(core.ScopeRead, http.HandlerFunc(ml.Message)))
	m.Handle("GET /api/public/v1/sends/{id}", s.Auth(core.ScopeRead, http.HandlerFunc(s.handleGetSend)))
	m.Handle("GET /api/public/v1/mailboxes/{id}/status", s.Auth(core.ScopeRead, ml.Status(statusCache)))
	m.Handle("GET /v1/mailboxes/{id}/status", s.Auth(core.ScopeRead, ml.Status(statusCache))) // the native name of the same check
	m.Handle("POST /emails", s.Bounded(rs.Post(rs.Send)))
	m.Handle("POST /emails/batch", s.Bounded(rs.Post(rs.Batch)))
	m.Handle("GET /emails", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.List)))
	m.Handle("GET /emails/{id}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.Get)))
	m.Handle("PATCH /emails/{id}", rs.Auth(core.ScopeSend, s.Idempotent(rs.Opts(kit.PostOpts{Audit: true}), kit.WholeTx(rs.Update))))
	m.Handle("POST /emails/{id}/cancel", rs.Auth(core.ScopeSend, s.Idempotent(rs.Opts(kit.PostOpts{EmptyBody: true, Audit: true}), kit.WholeTx(rs.Cancel))))
	// Resend's management routes: admin scope to change, read to look
	// (so a sending_access key, scope send, gets 403 on all of them).
	// Resend's receiving and inbox routes (package resend: receiving.go, inboxes.go, threads.go).
	m.Handle("GET /emails/receiving", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListReceiving)))
	m.Handle("GET /emails/receiving/{id}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.GetReceiving)))
	m.Handle("GET /emails/receiving/{id}/attachments", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ReceivingAttachments)))
	m.Handle("GET /emails/receiving/{id}/attachments/{attachment}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ReceivingAttachment)))
	m.HandleFunc("GET /emails/receiving/{id}/raw", rs.DownloadReceived)
	m.HandleFunc("GET /emails/receiving/{id}/attachments/{attachment}/content", rs.DownloadReceived)
	m.Handle("POST /inboxes", rs.Manage(kit.PostOpts{}, rs.CreateInbox))
	m.Handle("GET /inboxes", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListInboxes)))
	m.Handle("GET /inboxes/{inbox}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.GetInbox)))
	m.Handle("PATCH /inboxes/{inbox}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.UpdateInbox)))
	m.Handle("DELETE /inboxes/{inbox}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.RemoveInbox)))
	m.Handle("GET /inboxes/{inbox}/threads", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListThreads)))
	m.Handle("GET /inboxes/{inbox}/threads/search", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListThreads)))
	m.Handle("GET /inboxes/{inbox}/threads/{thread}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.GetThread)))
	m.Handle("PATCH /inboxes/{inbox}/threads/{thread}", rs.Auth(core.ScopeSend, http.HandlerFunc(rs.UpdateThread)))
	m.Handle("DELETE /inboxes/{inbox}/threads/{thread}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.RemoveThread)))
	m.Handle("GET /inboxes/{inbox}/threads/{thread}/emails", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ThreadEmails)))
	m.Handle("GET /inboxes/{inbox}/threads/{thread}/emails/{email}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ThreadEmail)))
	m.Handle("POST /inboxes/{inbox}/threads/{thread}/emails/{email}/reply", s.Bounded(rs.Post(rs.ReplyThreadEmail)))
	m.Handle("POST /inboxes/{inbox}/threads/{thread}/emails/{email}/forward", s.Bounded(rs.Post(rs.ForwardThreadEmail)))
	// Resend's inbox drafts (package resend: drafts.go): the native drafts of one inbox.
	m.Handle("POST /inboxes/{inbox}/drafts", s.Bounded(rs.Auth(core.ScopeSend, s.Idempotent(rs.Opts(kit.PostOpts{Audit: true}), rs.CreateDraft))))
	m.Handle("GET /inboxes/{inbox}/drafts", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListDrafts)))
	m.Handle("GET /inboxes/{inbox}/drafts/{draft}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.GetDraft)))
	m.Handle("PATCH /inboxes/{inbox}/drafts/{draft}", s.Bounded(rs.Auth(core.ScopeSend, http.HandlerFunc(rs.UpdateDraft))))
	m.Handle("DELETE /inboxes/{inbox}/drafts/{draft}", rs.Auth(core.ScopeSend, http.HandlerFunc(rs.RemoveDraft)))
	m.Handle("POST /inboxes/{inbox}/drafts/{draft}/send", rs.Auth(core.ScopeSend, s.SendDraft(rs.Opts(kit.PostOpts{Committed: rs.AcceptedMetric}), rs.DraftSend)))
	m.Handle("POST /domains", rs.Manage(kit.PostOpts{}, rs.CreateDomain))
	m.Handle("GET /domains", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListDomains)))
	m.Handle("GET /domains/{id}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.GetDomain)))
	m.Handle("PATCH /domains/{id}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.UpdateDomain)))
	m.Handle("DELETE /domains/{id}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.RemoveDomain)))
	m.Handle("POST /domains/{id}/verify", rs.Manage(kit.PostOpts{EmptyBody: true}, rs.VerifyDomain))
	m.Handle("POST /api-keys", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.CreateKey)))
	m.Handle("GET /api-keys", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.ListKeys)))
	m.Handle("DELETE /api-keys/{id}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.RemoveKey)))
	m.Handle("POST /templates", rs.Manage(kit.PostOpts{}, kit.WholeTx(rs.CreateTemplate)))
	m.Handle("GET /templates", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListTemplates)))
	m.Handle("GET /templates/{id}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.GetTemplate)))
	m.Handle("PATCH /templates/{id}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.UpdateTemplate)))
	m.Handle("DELETE /templates/{id}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.RemoveTemplate)))
	m.Handle("POST /templates/{id}/publish", rs.Manage(kit.PostOpts{EmptyBody: true}, kit.WholeTx(rs.PublishTemplate)))
	m.Handle("POST /templates/{id}/duplicate", rs.Manage(kit.PostOpts{EmptyBody: true}, kit.WholeTx(rs.DuplicateTemplate)))
	m.Handle("POST /suppressions", rs.Manage(kit.PostOpts{}, kit.WholeTx(rs.AddSuppression)))
	m.Handle("GET /suppressions", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.ListSuppressions)))
	m.Handle("GET /suppressions/{id}", rs.Auth(core.ScopeRead, http.HandlerFunc(rs.GetSuppression)))
	m.Handle("DELETE /suppressions/{id}", rs.Auth(core.ScopeAdmin, http.HandlerFunc(rs.RemoveSuppression)))
	m.Handle("POST /suppressions/batch/add", rs.Manage(kit.PostOpts{}, kit.WholeTx(rs.BatchAddSuppressions)))
	m.Handle("POST /suppressions/batch/remove", rs.Manage(kit.PostOpts{}, kit.WholeTx(rs.BatchRemoveSuppressions)))
	m.Handle("POST /webhooks", rs.Manage(kit.PostOpts{Secret: true}, s.handleCreateWebhook(http.StatusOK)))
	m.Handle("GET /webhooks", rs.Auth(core.ScopeRead, s.handleListWebhooks(s.AnswerResend)))
	m.Handle("GET /webhooks/{id}", rs.Auth(core.ScopeRead, s.handleGetWebhook(s.AnswerResend)))
	m.Handle("PATCH /webhooks/{id}", rs.Auth(core.ScopeAdmin, s.handleUpdateWebhook(s.AnswerResend)))
	m.Handle("DELETE /webhooks/{id}", rs.Auth(core.ScopeAdmin, s.handleDeleteWebhook(s.AnswerResend)))
	m.Handle("POST /webhooks/{id}/signing-secret/rotate", rs.Manage(kit.PostOpts{EmptyBody: true, Secret: true}, kit.WholeTx(s.handleRotateWebhook)))
	m.Handle("GET /webhooks/{id}/events", rs.Auth(core.ScopeRead, s.handleListDeliveries(s.AnswerResend)))
	m.Handle("GET /webhooks/{id}/events/{event_id}", rs.Auth(core.ScopeRead, s.handleGetDelivery(s.AnswerResend)))
	m.Handle("GET /webhooks/{id}/events/{event_id}/attempts", rs.Auth(core.ScopeRead, s.handleListAttempts(s.AnswerResend)))
	m.Handle("POST /webhooks/{id}/events/{event_id}/replay", rs.Manage(kit.PostOpts{EmptyBody: true}, kit.WholeTx(s.handleReplayDelivery)))
	m.HandleFunc("GET /openapi.json", handleOpenAPI)
	// Public: the token in the path is the credential (unsubscribe.go).
	m.HandleFunc("GET /u/{token}", s.handleUnsubscribePage)
	m.HandleFunc("POST /u/{token}", s.handleUnsubscribe)
	// Authenticated by the provider's signature, not an API key.
	m.HandleFunc("POST /v1/providers/ses/events", s.handleSESEvents)
	m.HandleFunc("POST /v1/providers/resend/events", s.handleResendEvents)

	if s.Cfg.Dashboard != nil {
		// Method-less: the dashboard answers its own methods, and its pages
		// are HTML, not API routes (docs/api.md, "The dashboard").
		m.Handle("/{$}", s.Cfg.Dashboard)
		m.Handle("/ui/", s.Cfg.Dashboard)
		m.Handle("/favicon.ico", s.Cfg.Dashboard)
	}
	m.HandleFunc(notFoundPattern, s.handleNotFound)
	return m.patterns
}
