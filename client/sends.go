package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// call runs r and decodes a 2xx body into v (when v is not nil). A body that
// does not decode is reported like any other failure of the call.
func (c *Client) call(ctx context.Context, r request, v any) (*response, error) {
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := decode(resp, v); err != nil {
			return nil, &CallError{Method: r.method, Path: r.path, IdempotencyKey: r.key, Attempts: 1, Err: err}
		}
	}
	return resp, nil
}

func (c *Client) sendLike(ctx context.Context, method, path string, body []byte, key string) (*Send, error) {
	key, err := keyOrNew(key)
	if err != nil {
		return nil, err
	}
	var s Send
	resp, err := c.call(ctx, request{method: method, path: path, body: body, key: key}, &s)
	if err != nil {
		return nil, err
	}
	s.Replayed = resp.header.Get("Idempotent-Replayed") == "true"
	s.Raw = json.RawMessage(resp.body)
	return &s, nil
}

// Send creates a send (POST /v1/send). Every attempt carries the same
// Idempotency-Key: opts.IdempotencyKey, or one UUID v4 made for this call
// when opts is nil or its key empty. The returned send's IdempotencyKey and
// Replayed say which key was used and whether the server replayed an
// earlier acceptance.
//
// Errors: [*Error] 422 validation_error (with Param), 422
// idempotency_key_reused, 400 idempotency_key_invalid, 401, 403, 413 are
// final. On an error with [IsOutcomeUnknown] the send may exist: look it up
// with SendByKey(ctx, IdempotencyKeyOf(err)) or retry with that key.
func (c *Client) Send(ctx context.Context, req *SendRequest, opts *SendOptions) (*Send, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	return c.SendRaw(ctx, body, opts)
}

// SendRaw is Send with a body the caller marshalled and froze itself (the
// outbox stores it): the bytes are sent as given, on every attempt.
func (c *Client) SendRaw(ctx context.Context, body []byte, opts *SendOptions) (*Send, error) {
	if !json.Valid(body) {
		return nil, fmt.Errorf("%w: the body is not valid JSON", ErrInvalidRequest)
	}
	return c.sendLike(ctx, http.MethodPost, "/v1/send", body, opts.idemKey())
}

func sendPath(id string, suffix string) (string, error) {
	return idPath("/v1/sends/", "send id", id, suffix)
}

// GetSend returns the send with its events (GET /v1/sends/{id}). Errors:
// 404 not_found ([IsNotFound]).
func (c *Client) GetSend(ctx context.Context, id string) (*Send, error) {
	p, err := sendPath(id, "")
	if err != nil {
		return nil, err
	}
	var s Send
	resp, err := c.call(ctx, request{method: http.MethodGet, path: p}, &s)
	if err != nil {
		return nil, err
	}
	s.Raw = json.RawMessage(resp.body)
	return &s, nil
}

// ListSends returns one page of sends, newest first (GET /v1/sends).
func (c *Client) ListSends(ctx context.Context, p *ListSendsParams) (*SendList, error) {
	var q url.Values
	if p != nil {
		q = listQuery(map[string]string{"idempotency_key": p.IdempotencyKey, "status": string(p.Status), "after": p.After,
			"recipient": p.Recipient}, p.Limit)
	}
	var l struct {
		Data []json.RawMessage `json:"data"`
		Next *string           `json:"next"`
	}
	resp, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/sends", query: q}, &l)
	if err != nil {
		return nil, err
	}
	out := &SendList{Data: make([]Send, len(l.Data)), Raw: json.RawMessage(resp.body)}
	if l.Next != nil {
		out.Next = *l.Next
	}
	for i, raw := range l.Data {
		if err := json.Unmarshal(raw, &out.Data[i]); err != nil {
			return nil, &CallError{Method: http.MethodGet, Path: "/v1/sends", Attempts: 1, Err: &decodeError{err: err}}
		}
		out.Data[i].Raw = raw
	}
	return out, nil
}

// SendByKey looks a send up by the Idempotency-Key it was created with
// (GET /v1/sends?idempotency_key=K). found is false when there is none:
// then no request with that key was ever accepted (or the send was deleted).
// The server keeps a send's key for as long as it keeps the send, long
// after the key stopped replaying, so this is the look-up to do before
// retrying an old task. If several sends carry the key (which the native
// API never makes), the newest is returned.
func (c *Client) SendByKey(ctx context.Context, idempotencyKey string) (s *Send, found bool, err error) {
	if err := ValidateIdempotencyKey(idempotencyKey); err != nil {
		return nil, false, err
	}
	l, err := c.ListSends(ctx, &ListSendsParams{IdempotencyKey: idempotencyKey, Limit: 1})
	if err != nil {
		return nil, false, err
	}
	if len(l.Data) == 0 {
		return nil, false, nil
	}
	return &l.Data[0], true, nil
}

func (c *Client) sendAction(ctx context.Context, id, action string, body []byte, opts *CallOptions) (*Send, error) {
	p, err := sendPath(id, "/"+action)
	if err != nil {
		return nil, err
	}
	return c.sendLike(ctx, http.MethodPost, p, body, opts.idemKey())
}

// Reconcile settles a send in status unknown (POST /v1/sends/{id}/reconcile)
// with OutcomeSent, OutcomeFailed or OutcomeResend. Needs the admin scope.
// Errors: 409 invalid_state when the send is not unknown, 404.
func (c *Client) Reconcile(ctx context.Context, id, outcome string, opts *CallOptions) (*Send, error) {
	body, _ := json.Marshal(map[string]string{"outcome": outcome})
	return c.sendAction(ctx, id, "reconcile", body, opts)
}

// Approve moves a send from pending_approval to queued (POST
// /v1/sends/{id}/approve). Needs the admin scope. Errors: 409 invalid_state
// from any other status, 404.
func (c *Client) Approve(ctx context.Context, id string, opts *CallOptions) (*Send, error) {
	return c.sendAction(ctx, id, "approve", nil, opts)
}

// Elicited relays the answer of the person at an agent's side to a send
// of this agent key that waits for approval (POST
// /v1/sends/{id}/elicitation): action "accept" queues it, "decline" or
// "cancel" cancels it. Needs an agent key with the send scope, the one
// that made the send. Errors: 409 invalid_state once decided, 404.
func (c *Client) Elicited(ctx context.Context, id, action string, opts *CallOptions) (*Send, error) {
	body, _ := json.Marshal(map[string]string{"action": action})
	return c.sendAction(ctx, id, "elicitation", body, opts)
}

// Reject moves a send from pending_approval to canceled (POST
// /v1/sends/{id}/reject). Needs the admin scope. Errors as Approve.
func (c *Client) Reject(ctx context.Context, id string, opts *CallOptions) (*Send, error) {
	return c.sendAction(ctx, id, "reject", nil, opts)
}

// Cancel turns a send that was never attempted (scheduled,
// pending_approval, or queued before its first attempt) into canceled
// (POST /v1/sends/{id}/cancel); it is never delivered. Needs the send
// scope. Errors: 409 invalid_state once an attempt began (the send may
// be delivered), 404.
func (c *Client) Cancel(ctx context.Context, id string, opts *CallOptions) (*Send, error) {
	return c.sendAction(ctx, id, "cancel", nil, opts)
}

// Reschedule moves a scheduled send to at (PATCH /v1/sends/{id}). Needs
// the send scope. Errors: 409 invalid_state when the send is not
// scheduled, 422 validation_error for a time in the past or more than 30
// days ahead, 404.
func (c *Client) Reschedule(ctx context.Context, id string, at time.Time, opts *CallOptions) (*Send, error) {
	p, err := sendPath(id, "")
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"scheduled_at": at.Format(time.RFC3339Nano)})
	return c.sendLike(ctx, http.MethodPatch, p, body, opts.idemKey())
}
