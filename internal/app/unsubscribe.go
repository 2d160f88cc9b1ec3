package app

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sendonce/sendonce/internal/core"
)

// One-click unsubscribe (RFC 8058; docs/deliverability.md, "One-click
// unsubscribe"). Each recipient's copy of a bulk send, or of a send that
// asked for it, carries a link and an address with a token of its own: the
// send's id, the recipient's index among the send's recipients
// (RecipientsOf's order) and an HMAC of both under the deployment's
// "unsubscribe" secret. The token names no address, and no one can make
// one for another recipient or send.

// Where an unsubscribe came from (the unsubscribes table's via).
const (
	UnsubscribeViaLink = "link"
	UnsubscribeViaMail = "mail"
)

// UnsubscribeLocalPrefix begins the local part of the mailto: form's
// address: unsubscribe+TOKEN@domain.
const UnsubscribeLocalPrefix = "unsubscribe+"

// unsubscribeMACLen is how many bytes of the HMAC a token keeps: 80 bits,
// more than online guessing covers, and short enough that the mailto:
// address's local part stays within 64 characters (RFC 5321).
const unsubscribeMACLen = 10

// maxUnsubscribeIndex bounds the recipient index a token may carry.
const maxUnsubscribeIndex = 9999

var unsubEnc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// unsubscribeKey is the deployment's key for unsubscribe tokens, shared by
// every process through the server secrets table.
type unsubscribeKey struct {
	mu  sync.Mutex
	key []byte
}

func (s *Service) unsubscribeSecret(ctx context.Context) ([]byte, error) {
	s.unsubKey.mu.Lock()
	defer s.unsubKey.mu.Unlock()
	if s.unsubKey.key != nil {
		return s.unsubKey.key, nil
	}
	var key []byte
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		fresh := make([]byte, 32)
		_, _ = rand.Read(fresh) // crypto/rand never fails (Go 1.24)
		var err error
		key, err = tx.ServerSecret(ctx, "unsubscribe", fresh)
		return err
	})
	if err != nil {
		// Not kept: a database that failed for a moment must not leave
		// the process without tokens for good.
		return nil, fmt.Errorf("unsubscribe key: %w", err)
	}
	s.unsubKey.key = key
	return key, nil
}

func unsubscribeMAC(key []byte, sendID string, idx int) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("sendonce-unsubscribe-v1\x00" + sendID + "\x00" + strconv.Itoa(idx)))
	return unsubEnc.EncodeToString(m.Sum(nil)[:unsubscribeMACLen])
}

// UnsubscribeToken is the token of the idx-th recipient of a send.
func (s *Service) UnsubscribeToken(ctx context.Context, sendID string, idx int) (string, error) {
	key, err := s.unsubscribeSecret(ctx)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(sendID, "snd_") + "." + strconv.Itoa(idx) + "-" + unsubscribeMAC(key, sendID, idx), nil
}

// parseUnsubscribeToken checks a token and returns the send and recipient
// index it names; core.ErrNotFound when it does not verify. Case does not
// matter: mail systems may change the case of a local part.
func (s *Service) parseUnsubscribeToken(ctx context.Context, token string) (string, int, error) {
	token = strings.ToLower(strings.TrimSpace(token))
	head, mac, ok := strings.Cut(token, "-")
	bare, idxS, ok2 := strings.Cut(head, ".")
	if !ok || !ok2 || bare == "" || len(bare) > 64 {
		return "", 0, core.ErrNotFound
	}
	idx, err := strconv.Atoi(idxS)
	if err != nil || idx < 0 || idx > maxUnsubscribeIndex || strconv.Itoa(idx) != idxS {
		return "", 0, core.ErrNotFound
	}
	key, err := s.unsubscribeSecret(ctx)
	if err != nil {
		return "", 0, err
	}
	sendID := "snd_" + bare
	if !hmac.Equal([]byte(mac), []byte(unsubscribeMAC(key, sendID, idx))) {
		return "", 0, core.ErrNotFound
	}
	return sendID, idx, nil
}

// UnsubscribeHeaders are the header fields of the copy of send for its
// recipient rcpt: List-Unsubscribe with the link (under Config.PublicURL)
// and, when Config.UnsubscribeDomain is set, the mailto: address; and
// List-Unsubscribe-Post. The DKIM signature covers both
// (dkim.SignedHeaders).
func (s *Service) UnsubscribeHeaders(ctx context.Context, send *core.Send, rcpt string) ([]core.Header, error) {
	idx := slices.Index(RecipientsOf(send), core.NormalizeAddress(rcpt))
	if idx < 0 {
		return nil, fmt.Errorf("unsubscribe headers: %s is not a recipient of %s", rcpt, send.ID)
	}
	token, err := s.UnsubscribeToken(ctx, send.ID, idx)
	if err != nil {
		return nil, err
	}
	v := "<" + strings.TrimSuffix(s.cfg.PublicURL, "/") + "/u/" + token + ">"
	if s.cfg.UnsubscribeDomain != "" {
		v += ", <mailto:" + UnsubscribeLocalPrefix + token + "@" + s.cfg.UnsubscribeDomain + ">"
	}
	return []core.Header{
		{Name: "List-Unsubscribe", Value: v},
		{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"},
	}, nil
}

// checkUnsubscribe refuses a send that would carry the unsubscribe headers
// but whose caller set List-Unsubscribe itself (two would be one too many).
// Several recipients are fine: delivery hands such a send over as one copy
// per recipient, each with its own token.
func checkUnsubscribe(send *core.Send, ownHeader bool) error {
	if send.NeedsUnsubscribe() && ownHeader {
		return core.Errorf(core.CodeValidation, "headers",
			"a bulk send, or one with unsubscribe, carries sendonce's own List-Unsubscribe and List-Unsubscribe-Post: leave them out")
	}
	return nil
}

// hasUnsubscribeHeader reports whether a caller's headers set a
// List-Unsubscribe field.
func hasUnsubscribeHeader(h []core.Header) bool {
	return slices.ContainsFunc(h, func(h core.Header) bool {
		return strings.EqualFold(h.Name, "List-Unsubscribe") || strings.EqualFold(h.Name, "List-Unsubscribe-Post")
	})
}

// CheckUnsubscribe reports whether token names a recipient of a send that
// exists: nil, or core.ErrNotFound. It changes nothing (GET /u/{token}:
// link scanners fetch every URL of a message).
func (s *Service) CheckUnsubscribe(ctx context.Context, token string) error {
	id, idx, err := s.parseUnsubscribeToken(ctx, token)
	if err != nil {
		return err
	}
	var send *core.Send
	if err := s.store.InTx(ctx, func(tx core.Tx) error {
		var err error
		send, err = tx.SendForUpdateIn(ctx, id) // a plain read: holds nothing
		return err
	}); err != nil {
		return err
	}
	if idx >= len(RecipientsOf(send)) {
		return core.ErrNotFound
	}
	return nil
}

// Unsubscribe records that the recipient a token names unsubscribed, via
// UnsubscribeViaLink or UnsubscribeViaMail: the address is suppressed for
// the tenant's bulk mail (origin unsubscribe; transactional mail still
// goes) and the send records email.unsubscribed, both once however often
// it is asked (created reports whether this call did). core.ErrNotFound
// for a token that does not verify or a send that no longer exists.
func (s *Service) Unsubscribe(ctx context.Context, token, via string) (created bool, err error) {
	id, idx, err := s.parseUnsubscribeToken(ctx, token)
	if err != nil {
		return false, err
	}
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		created = false
		send, err := tx.SendForUpdate(ctx, id)
		if err != nil {
			return err
		}
		rcpts := RecipientsOf(send)
		if idx >= len(rcpts) {
			return core.ErrNotFound
		}
		addr, now := rcpts[idx], s.Now()
		if created, err = tx.AddUnsubscribe(ctx, id, addr, via, now); err != nil || !created {
			return err
		}
		why := "unsubscribed through the one-click link"
		if via == UnsubscribeViaMail {
			why = "unsubscribed by mail to the List-Unsubscribe address"
		}
		sup := &core.Suppression{ID: NewID("sup_"), Tenant: send.Tenant, Address: addr, Reason: why,
			Origin: core.SuppressionUnsubscribe, SendID: id, Stream: core.StreamBulk, CreatedAt: now}
		if _, err := tx.AddSuppression(ctx, sup); err != nil {
			return err
		}
		return tx.AddEvent(ctx, id, core.Event{Type: core.EventUnsubscribed, At: now, Recipient: addr, Detail: why})
	})
	if errors.Is(err, core.ErrNotFound) {
		return false, core.ErrNotFound
	}
	return created, err
}
