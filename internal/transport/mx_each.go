package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Refusal is one recipient the recipient's own mail system refused for
// good: a 5xx to its RCPT or to the end of DATA, or a domain that takes no
// mail (no exchanger, null MX).
type Refusal struct {
	Recipient string
	Err       *Error // Permanent
}

// DeliverEach is Deliver with per-recipient outcomes (the mx transport
// talks to the recipients' own servers, so their refusals are final for
// those recipients only): recipients refused for good are returned as
// refusals and the others still get the message. The error is nil when
// every recipient not refused was delivered; Permanent when every
// recipient was refused (the refusals tell each one's reason); otherwise
// what Deliver would say (a temporary failure before any DATA leaves
// nothing delivered, a failure after one domain took it is Ambiguous).
func (m *MX) DeliverEach(ctx context.Context, env Envelope, raw []byte) ([]Refusal, error) {
	cfg := m.cfg
	if strings.ContainsAny(cfg.HELOName, "\r\n ") {
		return nil, &Error{Class: Temporary, Stage: StageDial, Err: errors.New("invalid transport configuration: invalid HELO name")}
	}
	if stage, err := checkEnvelope(env); err != nil {
		return nil, &Error{Class: Permanent, Stage: stage, Err: err}
	}
	groups, err := groupByDomain(env.To)
	if err != nil {
		return nil, &Error{Class: Permanent, Stage: StageRcpt, Err: err}
	}
	if len(groups) > cfg.MaxDomains {
		return nil, &Error{Class: Permanent, Stage: StageRcpt, Err: fmt.Errorf("the recipients are in %d domains; the mx transport delivers one message to at most %d (send through a relay instead)", len(groups), cfg.MaxDomains)}
	}
	res, err := m.resolver()
	if err != nil {
		return nil, &Error{Class: Temporary, Stage: StageResolve, Err: err}
	}
	var (
		sessions []*mxSession
		refused  []Refusal
		last     *Error
	)
	defer func() {
		for _, s := range sessions {
			s.abort(ctx)
		}
	}()
	refuse := func(rcpts []string, e *Error) {
		for _, r := range rcpts {
			refused = append(refused, Refusal{Recipient: r, Err: e})
		}
		last = e
	}
	for _, g := range groups {
		s, err := m.prepare(ctx, res, env, g, len(raw), true)
		var e *Error
		switch {
		case err == nil:
			refused = append(refused, s.a.refused...)
			if len(s.a.refused) > 0 {
				last = s.a.refused[len(s.a.refused)-1].Err
			}
			if len(s.rcpts) > 0 {
				sessions = append(sessions, s)
			}
		case errors.As(err, &e) && e.Class == Permanent:
			refuse(g.rcpts, e) // the domain's mail system refused them all
		default:
			return nil, err // temporary: nothing was delivered, all retried
		}
	}
	return m.commitEach(ctx, sessions, refused, last, raw)
}

// commitEach sends the message on each domain's prepared session, after
// every domain's RCPTs were answered: a 5xx to the end of data refuses
// that domain's recipients; a failure after some domain took it leaves
// the send Ambiguous (PartialDeliveryError); a failure before any did is
// returned as it is, for the whole message to be retried.
func (m *MX) commitEach(ctx context.Context, sessions []*mxSession, refused []Refusal, last *Error, raw []byte) ([]Refusal, error) {
	var delivered []string
	for i, s := range sessions {
		err := s.commit(ctx, raw)
		if err == nil {
			delivered = append(delivered, s.rcpts...)
			continue
		}
		te := err.(*Error)
		if te.Class == Permanent {
			for _, r := range s.rcpts { // a 5xx to the end of data: not delivered
				refused = append(refused, Refusal{Recipient: r, Err: te})
			}
			last = te
			continue
		}
		if len(delivered) == 0 {
			return nil, err
		}
		var undelivered []string
		for _, later := range sessions[i:] {
			undelivered = append(undelivered, later.rcpts...)
		}
		return refused, &Error{Class: Ambiguous, Stage: te.Stage, Reached: true, Code: te.Code,
			Err: &PartialDeliveryError{Delivered: delivered, Undelivered: undelivered, Err: err}}
	}
	if len(delivered) == 0 && last != nil {
		return refused, &Error{Class: Permanent, Stage: last.Stage, Reached: last.Reached, Code: last.Code,
			Err: fmt.Errorf("every recipient was refused; the last: %w", last)}
	}
	return refused, nil
}
