package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

const sendProviderColumns = `send_id, tenant, transport, provider, message_id, since, updated_at`

func scanSendProvider(r rowScanner) (*core.SendProvider, error) {
	var (
		p          core.SendProvider
		since, upd int64
	)
	err := r.Scan(&p.SendID, &p.Tenant, &p.Transport, &p.Provider, &p.MessageID, &since, &upd)
	if err := rowErr("read send provider", err); err != nil {
		return nil, err
	}
	p.Since, p.UpdatedAt = fromMicros(since), fromMicros(upd)
	return &p, nil
}

// SendProvider implements core.Store.
func (s *Store) SendProvider(ctx context.Context, sendID string) (*core.SendProvider, error) {
	return scanSendProvider(s.r.queryRow(ctx, `SELECT `+sendProviderColumns+` FROM send_providers WHERE send_id = ?`, sendID))
}

// SetSendProvider implements core.Tx.
func (t *Tx) SetSendProvider(ctx context.Context, p *core.SendProvider) error {
	_, err := t.q.exec(ctx, `INSERT INTO send_providers (`+sendProviderColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (send_id) DO UPDATE SET
			since = CASE WHEN send_providers.transport = excluded.transport THEN send_providers.since ELSE excluded.since END,
			transport = excluded.transport, provider = excluded.provider, message_id = excluded.message_id,
			updated_at = excluded.updated_at`,
		p.SendID, p.Tenant, p.Transport, p.Provider, p.MessageID, micros(p.Since), micros(p.UpdatedAt))
	if err != nil {
		return fmt.Errorf("set send provider: %w", err)
	}
	return nil
}

// SendByProviderMessage implements core.Tx.
func (t *Tx) SendByProviderMessage(ctx context.Context, provider, messageID string) (*core.Send, *core.SendProvider, error) {
	if messageID == "" {
		return nil, nil, core.ErrNotFound
	}
	p, err := scanSendProvider(t.q.queryRow(ctx, `SELECT `+sendProviderColumns+` FROM send_providers
		WHERE provider = ? AND message_id = ?`, provider, messageID))
	if errors.Is(err, core.ErrNotFound) {
		// One copy of a send that goes out as one copy per recipient.
		p, err = scanSendProvider(t.q.queryRow(ctx, `SELECT `+prefixed("p.", sendProviderColumns)+` FROM send_provider_copies c
			JOIN send_providers p ON p.send_id = c.send_id
			WHERE c.provider = ? AND c.message_id = ?`, provider, messageID))
	}
	if err != nil {
		return nil, nil, err
	}
	s, err := t.SendForUpdate(ctx, p.SendID)
	return s, p, err
}

// AddProviderCopy implements core.Tx.
func (t *Tx) AddProviderCopy(ctx context.Context, sendID, provider, messageID string) error {
	_, err := t.q.exec(ctx, `INSERT INTO send_provider_copies (provider, message_id, send_id) VALUES (?, ?, ?)
		ON CONFLICT (provider, message_id) DO NOTHING`, provider, messageID, sendID)
	if err != nil {
		return fmt.Errorf("add provider copy: %w", err)
	}
	return nil
}

// prefixed qualifies each of a comma-separated column list with prefix.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ", ")
	for i, c := range parts {
		parts[i] = prefix + c
	}
	return strings.Join(parts, ", ")
}

// SendByMessageID implements core.Tx. Without a send id it reads through
// send_providers' (provider, message_id) index — the sends handed to the
// provider whose id never came back are few — so sends need no index on
// Message-ID.
func (t *Tx) SendByMessageID(ctx context.Context, provider, id, sendID string) (*core.Send, *core.SendProvider, error) {
	if sendID == "" {
		ids, err := list(ctx, t.q, "sends by message id", scanString, nil, `SELECT p.send_id FROM send_providers p
			JOIN sends s ON s.id = p.send_id
			WHERE p.provider = ? AND p.message_id = '' AND s.message_id = ? LIMIT 2`, provider, id)
		if err != nil {
			return nil, nil, err
		}
		if len(ids) != 1 {
			return nil, nil, core.ErrNotFound
		}
		sendID = ids[0]
	}
	s, err := t.SendForUpdate(ctx, sendID)
	if err != nil {
		return nil, nil, err
	}
	if s.MessageID != id {
		return nil, nil, core.ErrNotFound
	}
	p, err := scanSendProvider(t.q.queryRow(ctx, `SELECT `+sendProviderColumns+` FROM send_providers WHERE send_id = ?`, s.ID))
	if errors.Is(err, core.ErrNotFound) {
		return s, nil, nil
	}
	return s, p, err
}

// providerOf fills the send's provider fields for SendWithEvents, once a
// provider gave its id.
func providerOf(ctx context.Context, q querier, s *core.Send) error {
	p, err := scanSendProvider(q.queryRow(ctx, `SELECT `+sendProviderColumns+` FROM send_providers WHERE send_id = ?`, s.ID))
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.MessageID != "" {
		s.Provider, s.ProviderMessageID = p.Provider, p.MessageID
	}
	return nil
}
