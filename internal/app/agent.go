package app

import (
	"context"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// Guardrails of agent keys (docs/agents.md). They are enforced here, on the server,
// whatever the agent's prompt or MCP server says:
//
//   - an agent key may not set bcc, from or extra headers (403 forbidden);
//   - a key with an allowlist may mail only those addresses or domains
//     (403 forbidden, param naming the field);
//   - a key with caps may create at most MaxPerHour sends in any sliding
//     hour and MaxPerDay in any sliding day (429 rate_limited).
//
// 403 and 429 are never stored as an idempotent response, so a corrected
// retry with the same Idempotency-Key runs afresh.

// checkAgentRequest refuses what an agent key may not ask for. It runs
// before any other validation of the request.
func checkAgentRequest(key *core.APIKey, r *SendRequest) error {
	if !key.Agent {
		return nil
	}
	switch {
	case len(r.Bcc) > 0:
		return core.Errorf(core.CodeForbidden, "bcc", "agent keys may not set bcc: every recipient must be visible")
	case r.From != "":
		return core.Errorf(core.CodeForbidden, "from", "agent keys may not set from: mail goes out from the mailbox's own address")
	case len(r.Headers) > 0:
		return core.Errorf(core.CodeForbidden, "headers", "agent keys may not set extra headers")
	case len(r.Attachments) > 0:
		// A file an agent attaches is content no person looked at, and a
		// path would make the server fetch where the agent says.
		return core.Errorf(core.CodeForbidden, "attachments", "agent keys may not send attachments")
	}
	return nil
}

// checkAllowlist refuses a recipient outside the key's allowlist. Addresses
// are the parsed, rendered ones of the send.
func checkAllowlist(key *core.APIKey, send *core.Send) error {
	if len(key.AllowRecipients) == 0 {
		return nil
	}
	for _, f := range []struct {
		param string
		list  []string
	}{{"to", send.To}, {"cc", send.Cc}, {"bcc", send.Bcc}} {
		for _, raw := range f.list {
			a, err := mail.ParseAddress(raw)
			if err != nil || !RecipientAllowed(key.AllowRecipients, a.Address) {
				return core.Errorf(core.CodeForbidden, f.param, "this API key may not mail %s: it is not on the key's recipient allowlist", addrOrRaw(a, raw))
			}
		}
	}
	return nil
}

func addrOrRaw(a *mail.Address, raw string) string {
	if a != nil {
		return a.Address
	}
	return raw
}

// RecipientAllowed reports whether address matches an allowlist entry: the
// same address, or a domain ("example.com" or "@example.com") that is the
// address's domain. Comparison ignores case.
func RecipientAllowed(allow []string, address string) bool {
	address = strings.ToLower(address)
	_, domain, _ := strings.Cut(address, "@")
	for _, e := range allow {
		e = strings.ToLower(e)
		switch {
		case strings.Contains(strings.TrimPrefix(e, "@"), "@"):
			if e == address {
				return true
			}
		case strings.TrimPrefix(e, "@") == domain:
			return true
		}
	}
	return false
}

// NormalizeAllowlist validates allowlist entries (addresses or domains) and
// returns them in lower case.
func NormalizeAllowlist(entries []string) ([]string, error) {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		d := strings.TrimPrefix(e, "@")
		switch {
		case e == "" || strings.ContainsAny(e, ", \t\r\n<>"):
			return nil, core.Errorf(core.CodeValidation, "allow_recipient", "allowlist entry %q is not an address or a domain", e)
		case strings.Contains(d, "@"):
			a, err := mail.ParseAddress(d)
			if err != nil || a.Address != d {
				return nil, core.Errorf(core.CodeValidation, "allow_recipient", "allowlist entry %q is not a bare address", e)
			}
			e = d
		case !strings.Contains(d, "."):
			return nil, core.Errorf(core.CodeValidation, "allow_recipient", "allowlist entry %q is not a domain with a dot", e)
		default:
			e = d
		}
		out = append(out, e)
	}
	return out, nil
}

// checkCaps counts the key's sends in tx and refuses one past a cap.
func (s *Service) checkCaps(ctx context.Context, tx core.Tx, key *core.APIKey, now time.Time) error {
	for _, c := range []struct {
		max    int
		window time.Duration
		name   string
	}{{key.MaxPerHour, time.Hour, "hour"}, {key.MaxPerDay, 24 * time.Hour, "day"}} {
		if c.max <= 0 {
			continue
		}
		n, oldest, err := tx.CountKeySends(ctx, key.ID, now.Add(-c.window))
		if err != nil {
			return err
		}
		if n >= c.max {
			retry := max(oldest.Add(c.window).Sub(now), time.Second)
			// RetryAfter: when the oldest counted send leaves the window.
			e := core.Errorf(core.CodeRateLimited, "", "this API key may create at most %d sends per %s; it has created %d", c.max, c.name, n)
			e.RetryAfter = retry
			return e
		}
	}
	return nil
}

// tracksKey reports whether sends of the key record their key (for caps,
// for an agent's own list, and for a restricted key's lookup by
// Idempotency-Key, which finds the sends of the keys with its limits).
func tracksKey(key *core.APIKey) bool {
	return key.OwnsIdempotencyKeys() || key.MaxPerHour > 0 || key.MaxPerDay > 0
}

// PreviewSend is PrepareSend for a preview: what would be sent, and whether
// the key's guardrails would refuse it (caps are not counted: a preview
// writes nothing and takes no lock).
func (s *Service) PreviewSend(ctx context.Context, key *core.APIKey, r *SendRequest) (*core.Send, error) {
	send, err := s.PrepareSend(ctx, key, "", r)
	if err != nil {
		return nil, err
	}
	if send.From == "" {
		return nil, fmt.Errorf("preview: empty from")
	}
	return send, nil
}
