package core

import (
	"context"
	"time"
)

// Draft is a message kept unsent until someone sends it (docs/agents.md,
// "Drafts"): an agent writes it, a person reads and edits it, and sending
// it is one send whoever presses the button and however often.
type Draft struct {
	Tenant string
	ID     string
	// MailboxID is the mailbox the draft sends from ("" for the default):
	// a key limited to mailboxes sees only the drafts of its own.
	MailboxID string
	// ReplyToID names the received message a reply draft answers ("" for
	// a new message); ThreadID is that message's thread.
	ReplyToID string
	ThreadID  string
	// Content is the send's fields as app encodes them (JSON): the draft
	// is whatever a send request may say.
	Content []byte
	// Version counts the draft's edits, so that a send never sends
	// content other than the content it read (an edit in between makes
	// the send answer 409 and be pressed again).
	Version int
	// IdempotencyKey is the key the draft is sent under, fixed when it
	// is created; SendID the send it became, "" while unsent.
	IdempotencyKey string
	SendID         string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	SentAt         *time.Time
}

// DraftFilter selects a page of a tenant's drafts, newest first.
type DraftFilter struct {
	// MailboxIDs, when set, keeps drafts of those mailboxes only (a key
	// limited to mailboxes).
	MailboxIDs []string
	Limit      int
	// After is the last id of the previous page.
	After string
}

// Drafts reads drafts.
type Drafts interface {
	// Draft returns one draft of the tenant; ErrNotFound.
	Draft(ctx context.Context, tenant, id string) (*Draft, error)
	// ListDrafts returns a page of drafts (at most f.Limit), newest first.
	ListDrafts(ctx context.Context, tenant string, f DraftFilter) ([]*Draft, error)
}

// DraftsTx changes drafts.
type DraftsTx interface {
	InsertDraft(ctx context.Context, d *Draft) error
	// UpdateDraft stores d's content as the edit after version: false
	// when the draft was sent or edited since (or is gone).
	UpdateDraft(ctx context.Context, d *Draft, version int) (bool, error)
	// MarkDraftSent records the send the draft at version became: false
	// when it was sent or edited since.
	MarkDraftSent(ctx context.Context, tenant, id string, version int, sendID string, at time.Time) (bool, error)
	// DeleteDraft deletes a draft, sent or not: false when there is none.
	DeleteDraft(ctx context.Context, tenant, id string) (bool, error)
}
