package core

import "context"

// FolderQuarantine is the folder of a received message kept from agents
// until an admin releases it (docs/agents.md, "Quarantine"). Only a
// received message is ever in it, never a thread: a quarantined message
// is in no thread until it is released.
const FolderQuarantine = "quarantine"

// An inbox's quarantine rule (Mailbox.Quarantine).
const (
	// QuarantineDMARCFail quarantines mail that fails DMARC for its From
	// domain. It is the default: the contract keeps such mail from agents.
	QuarantineDMARCFail = "dmarc_fail"
	// QuarantineUnknownSenders quarantines that, and mail from an address
	// the tenant has never corresponded with (app.Service.Receive says how
	// that is decided).
	QuarantineUnknownSenders = "unknown_senders"
	// QuarantineNone quarantines nothing.
	QuarantineNone = "none"
)

// QuarantineRule is m's rule, the default for a mailbox without one (the
// default mailbox, which is not stored).
func (m *Mailbox) QuarantineRule() string {
	if m == nil || m.Quarantine == "" {
		return QuarantineDMARCFail
	}
	return m.Quarantine
}

// MaySeeQuarantine says whether k may read quarantined mail: an admin key
// that is not an agent's. Everyone else is told it does not exist, so
// that an agent cannot even learn that mail is waiting.
func (k *APIKey) MaySeeQuarantine() bool { return k.Has(ScopeAdmin) && !k.Agent }

// QuarantineReads are the reads the quarantine rules need.
type QuarantineReads interface {
	// KnownCorrespondent says whether the tenant has corresponded with
	// the bare, lower-case address: a send to it, or a message from it
	// the tenant accepted (received outside the quarantine, or released).
	KnownCorrespondent(ctx context.Context, tenant, address string) (bool, error)
}

// QuarantineTx changes quarantined mail inside a transaction.
type QuarantineTx interface {
	// ReleaseReceived moves the tenant's quarantined message id into the
	// inbox folder; false when it was not in the quarantine (already
	// released, or no such message).
	ReleaseReceived(ctx context.Context, tenant, id string) (bool, error)
	// SetReceivedThread files a released message in its thread, with the
	// send it answers ("" for none).
	SetReceivedThread(ctx context.Context, tenant, id, threadID, sendID string) error
	// DeleteReceived deletes one received message, its place in its
	// thread and its raw bytes unless another message of the tenant
	// names them; ErrNotFound for none.
	DeleteReceived(ctx context.Context, tenant, id string) error
	// SetMailboxQuarantine sets a mailbox's rule; ErrNotFound for none.
	SetMailboxQuarantine(ctx context.Context, tenant, id, rule string) error
}
