package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Suppression is an entry of the suppression list: sends to the address
// skip it (docs/api.md, "Suppressions").
type Suppression struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Reason    string    `json:"reason"`
	Origin    string    `json:"origin"`  // "bounce", "complaint", "manual" or "unsubscribe" (bulk mail only)
	SendID    string    `json:"send_id"` // the send that caused it; "" for manual
	CreatedAt time.Time `json:"created_at"`
	// Created is false when the address was on the list already (the
	// existing entry is returned unchanged).
	Created bool `json:"-"`
}

// SuppressionList is one page of the suppression list, newest first.
type SuppressionList struct {
	Data []Suppression `json:"data"`
	Next string        `json:"next"` // "" on the last page
}

// ListSuppressionsParams filters GET /v1/suppressions; all optional.
type ListSuppressionsParams struct {
	Email  string
	Origin string
	Limit  int // 1 to 100; 0: the server's default (20)
	After  string
}

func suppressionPath(email string) (string, error) {
	return idPath("/v1/suppressions/", "address", email, "")
}

// AddSuppression puts an address on the list by hand (POST
// /v1/suppressions). Needs the admin scope. Errors: 422 validation_error.
func (c *Client) AddSuppression(ctx context.Context, email, reason string, opts *CallOptions) (*Suppression, error) {
	body, err := json.Marshal(map[string]string{"email": email, "reason": reason})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	s, resp, err := postFor[Suppression](ctx, c, "/v1/suppressions", body, opts.idemKey())
	if err != nil {
		return nil, err
	}
	s.Created = resp.status == http.StatusCreated
	return s, nil
}

// GetSuppression returns the entry for an address. Errors: 404 not_found
// when it is not on the list.
func (c *Client) GetSuppression(ctx context.Context, email string) (*Suppression, error) {
	path, err := suppressionPath(email)
	if err != nil {
		return nil, err
	}
	return get[Suppression](ctx, c, path, nil)
}

// ListSuppressions returns a page of the list.
func (c *Client) ListSuppressions(ctx context.Context, p *ListSuppressionsParams) (*SuppressionList, error) {
	var q url.Values
	if p != nil {
		q = listQuery(map[string]string{"email": p.Email, "origin": p.Origin, "after": p.After}, p.Limit)
	}
	// The query stays in the path, as CallError.Path has always shown it.
	path := "/v1/suppressions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return get[SuppressionList](ctx, c, path, nil)
}

// DeleteSuppression takes an address off the list: the next send to it is
// attempted. Needs the admin scope. Errors: 404 not_found (also on a
// retry whose first attempt deleted it but lost the answer).
func (c *Client) DeleteSuppression(ctx context.Context, email string) error {
	path, err := suppressionPath(email)
	if err != nil {
		return err
	}
	_, err = c.call(ctx, request{method: http.MethodDelete, path: path}, nil)
	return err
}
