package core

import "fmt"

// CodeLimitExceeded: the tenant already stores as many of a resource as
// its cap allows (403; nothing was stored).
const CodeLimitExceeded = "limit_exceeded"

// Resource names a kind of row a tenant stores under a cap; the store
// knows how to count each (sqlstore's capTables).
type Resource string

const (
	ResourceTemplates Resource = "templates"
	ResourceMailboxes Resource = "mailboxes"
	ResourceDomains   Resource = "domains"
	// ResourceAPIKeys counts keys not revoked.
	ResourceAPIKeys Resource = "api_keys"
	// ResourceWebhooks counts webhook endpoints.
	ResourceWebhooks Resource = "webhooks"
	// ResourceSuppressions counts the entries added by hand (bounces and
	// complaints add theirs whatever the cap).
	ResourceSuppressions Resource = "suppressions"
	// ResourceDrafts counts drafts, sent ones included (they stay until
	// deleted, or until their send is purged after its retention).
	ResourceDrafts Resource = "drafts"
)

// The binary's default caps per tenant (--max-templates, --max-mailboxes,
// --max-domains, --max-api-keys): far above what one organisation's
// transactional mail uses (a few dozen templates, a handful of domains),
// low enough that one tenant's script gone wrong cannot fill the
// database with rows every list then reads.
const (
	DefaultMaxTemplates = 1000
	DefaultMaxMailboxes = 100
	DefaultMaxDomains   = 100
	DefaultMaxAPIKeys   = 100
	// Resend allows a handful of webhook endpoints per team; 50 leaves
	// room for one per environment and service.
	DefaultMaxWebhooks = 50
	// A suppression list imported by hand from another provider can be
	// large; a million rows is still one index.
	DefaultMaxSuppressions = 1000000
	// Drafts are written by agents, which loop: ten thousand is more
	// than a team reviews, and bounds what one loop leaves behind.
	DefaultMaxDrafts = 10000
)

// Caps is the most rows of each resource one tenant may store. A resource
// absent (or 0) has no cap.
type Caps map[Resource]int

// LimitExceeded is the error of a create past its tenant's cap.
func LimitExceeded(r Resource, max int) *Error {
	return &Error{Code: CodeLimitExceeded, Param: string(r),
		Message: fmt.Sprintf("this tenant already has the most %s it may store (%d); delete some first", r, max)}
}
