package dashboard

import "github.com/sendonce/sendonce/internal/core"

// route is one dashboard URL: who may use it and what serves it. scope ""
// is the sign-in page, served without a session.
type route struct {
	pattern string
	scope   core.Scope
	h       func(d *Dashboard, q *req) error
}

// routes is every dashboard URL. Paths live under /ui/ (and / itself): the
// API's compatibility routes own /domains, /templates and /emails.
var routes = []route{
	{"GET /ui/signin", "", (*Dashboard).signInPage},
	{"POST /ui/signin", "", (*Dashboard).signIn},
	{"POST /ui/signout", core.ScopeRead, (*Dashboard).signOut},
	{"GET /ui/assets/{file}", "", (*Dashboard).asset},
	{"GET /favicon.ico", "", (*Dashboard).favicon},

	{"GET /{$}", core.ScopeRead, (*Dashboard).overview},
	{"GET /ui/sends", core.ScopeRead, (*Dashboard).sends},
	{"GET /ui/sends/live", core.ScopeRead, (*Dashboard).sendsLive},
	{"GET /ui/sends/{id}", core.ScopeRead, (*Dashboard).send},
	{"GET /ui/sends/{id}/html", core.ScopeRead, (*Dashboard).sendHTML},
	{"GET /ui/sends/{id}/raw", core.ScopeRead, (*Dashboard).sendRaw},
	{"GET /ui/sends/{id}/confirm", core.ScopeAdmin, (*Dashboard).confirmAction},
	{"POST /ui/sends/{id}/action", core.ScopeAdmin, (*Dashboard).sendAction},
	{"GET /ui/approvals", core.ScopeRead, (*Dashboard).approvals},

	{"GET /ui/inbox", core.ScopeRead, (*Dashboard).inbox},
	{"GET /ui/inbox/live", core.ScopeRead, (*Dashboard).inboxLive},
	{"GET /ui/inbox/{id}", core.ScopeRead, (*Dashboard).inboxMessage},
	{"GET /ui/inbox/{id}/html", core.ScopeRead, (*Dashboard).inboxHTML},
	{"GET /ui/inbox/{id}/raw", core.ScopeRead, (*Dashboard).inboxRaw},

	// Received mail. Changing a thread and replying need send, as in the
	// API (PATCH /v1/threads/{id}, POST /v1/received/{id}/reply).
	{"GET /ui/mail", core.ScopeRead, (*Dashboard).mailList},
	{"GET /ui/mail/{id}", core.ScopeRead, (*Dashboard).mailThread},
	{"POST /ui/mail/{id}/change", core.ScopeSend, (*Dashboard).mailChange},
	{"GET /ui/received/{id}/html", core.ScopeRead, (*Dashboard).receivedHTML},
	{"GET /ui/received/{id}/raw", core.ScopeRead, (*Dashboard).receivedRaw},
	{"GET /ui/received/{id}/attachments/{att}", core.ScopeRead, (*Dashboard).receivedAttachment},
	{"POST /ui/received/{id}/reply", core.ScopeSend, (*Dashboard).mailReply},
	{"GET /ui/quarantine", core.ScopeAdmin, (*Dashboard).quarantine},
	{"POST /ui/quarantine/{id}/release", core.ScopeAdmin, (*Dashboard).releaseQuarantined},
	{"POST /ui/quarantine/{id}/delete", core.ScopeAdmin, (*Dashboard).deleteQuarantined},

	{"GET /ui/keys", core.ScopeAdmin, (*Dashboard).keys},
	{"POST /ui/keys", core.ScopeAdmin, (*Dashboard).createKey},
	{"GET /ui/keys/{id}/revoke", core.ScopeAdmin, (*Dashboard).confirmRevoke},
	{"POST /ui/keys/{id}/revoke", core.ScopeAdmin, (*Dashboard).revokeKey},

	{"GET /ui/domains", core.ScopeRead, (*Dashboard).domains},
	{"GET /ui/domains/{domain}", core.ScopeRead, (*Dashboard).domain},
	{"POST /ui/domains/{domain}/check", core.ScopeAdmin, (*Dashboard).checkDomain},

	{"GET /ui/templates", core.ScopeRead, (*Dashboard).templates},
	{"GET /ui/templates/{id}", core.ScopeRead, (*Dashboard).template},
	{"POST /ui/templates/{id}", core.ScopeAdmin, (*Dashboard).saveTemplate},
	{"POST /ui/templates/{id}/preview", core.ScopeAdmin, (*Dashboard).previewTemplate},

	{"GET /ui/webhooks", core.ScopeRead, (*Dashboard).webhooks},
	{"POST /ui/webhooks", core.ScopeAdmin, (*Dashboard).createWebhook},
	{"GET /ui/webhooks/{id}", core.ScopeRead, (*Dashboard).webhook},
	{"POST /ui/webhooks/{id}/status", core.ScopeAdmin, (*Dashboard).setWebhookStatus},
	{"GET /ui/webhooks/{id}/delete", core.ScopeAdmin, (*Dashboard).confirmWebhook},
	{"POST /ui/webhooks/{id}/delete", core.ScopeAdmin, (*Dashboard).deleteWebhook},
	{"GET /ui/webhooks/{id}/rotate", core.ScopeAdmin, (*Dashboard).confirmWebhook},
	{"POST /ui/webhooks/{id}/rotate", core.ScopeAdmin, (*Dashboard).rotateWebhook},
	{"GET /ui/webhooks/{id}/events/{event}", core.ScopeRead, (*Dashboard).delivery},
	{"GET /ui/webhooks/{id}/events/{event}/replay", core.ScopeAdmin, (*Dashboard).confirmReplay},
	{"POST /ui/webhooks/{id}/events/{event}/replay", core.ScopeAdmin, (*Dashboard).replayDelivery},

	{"GET /ui/suppressions", core.ScopeRead, (*Dashboard).suppressions},
	{"POST /ui/suppressions", core.ScopeAdmin, (*Dashboard).addSuppression},
	{"GET /ui/suppressions/{id}/remove", core.ScopeAdmin, (*Dashboard).confirmRemoveSuppression},
	{"POST /ui/suppressions/{id}/remove", core.ScopeAdmin, (*Dashboard).removeSuppression},
	{"GET /ui/inbound", core.ScopeAdmin, (*Dashboard).unmatched},
	{"GET /ui/dmarc", core.ScopeRead, (*Dashboard).dmarc},
	{"GET /ui/destinations", core.ScopeAdmin, (*Dashboard).destinations},

	{"GET /ui/audit", core.ScopeAdmin, (*Dashboard).audit},
}

// navItem is one entry of the menu; scope hides it from keys without it.
type navItem struct {
	Label, Path string
	scope       core.Scope
}

var nav = []navItem{
	{"Overview", "/", core.ScopeRead},
	{"Sends", "/ui/sends", core.ScopeRead},
	{"Mail", "/ui/mail", core.ScopeRead},
	{"Quarantine", "/ui/quarantine", core.ScopeAdmin},
	{"Dev inbox", "/ui/inbox", core.ScopeRead},
	{"Approvals", "/ui/approvals", core.ScopeRead},
	{"API keys", "/ui/keys", core.ScopeAdmin},
	{"Domains", "/ui/domains", core.ScopeRead},
	{"Templates", "/ui/templates", core.ScopeRead},
	{"Webhooks", "/ui/webhooks", core.ScopeRead},
	{"Suppressions", "/ui/suppressions", core.ScopeRead},
	{"Unmatched inbound", "/ui/inbound", core.ScopeAdmin},
	{"DMARC", "/ui/dmarc", core.ScopeRead},
	{"Destinations", "/ui/destinations", core.ScopeAdmin},
	{"Audit log", "/ui/audit", core.ScopeAdmin},
}
