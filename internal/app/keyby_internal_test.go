package app

import (
	"reflect"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

func TestCreateKeyBy_NewKeyIsNoFreerThanItsCreator(t *testing.T) {
	s := New(nil, Config{RateLimit: 100, RateLimitWindow: time.Minute}, nil)
	limited := &core.APIKey{Tenant: "t1", Mailboxes: []string{"a", "b"}, AllowRecipients: []string{"example.net", "x@example.org"},
		RequiresApproval: true, Agent: true, MaxPerHour: 5, MaxPerDay: 20, RateLimit: 10}
	free := &core.APIKey{Tenant: "t2"}
	unlimited := &core.APIKey{Tenant: "t3", RateLimit: -1}
	for _, c := range []struct {
		name    string
		creator *core.APIKey
		p, want NewKeyParams
		refused bool
	}{
		{name: "open fields take the creator's", creator: limited, p: NewKeyParams{Tenant: "other"},
			want: NewKeyParams{Tenant: "t1", Mailboxes: []string{"a", "b"}, AllowRecipients: []string{"example.net", "x@example.org"},
				RequiresApproval: true, Agent: true, MaxPerHour: 5, MaxPerDay: 20, RateLimit: 10}},
		{name: "narrower asks are kept", creator: limited,
			p: NewKeyParams{Mailboxes: []string{"b"}, AllowRecipients: []string{"Y@Example.net", "x@example.org"}, MaxPerHour: 1, MaxPerDay: 2, RateLimit: 3},
			want: NewKeyParams{Tenant: "t1", Mailboxes: []string{"b"}, AllowRecipients: []string{"y@example.net", "x@example.org"},
				RequiresApproval: true, Agent: true, MaxPerHour: 1, MaxPerDay: 2, RateLimit: 3}},
		{name: "another mailbox", creator: limited, p: NewKeyParams{Mailboxes: []string{"c"}}, refused: true},
		{name: "another domain", creator: limited, p: NewKeyParams{AllowRecipients: []string{"example.com"}}, refused: true},
		{name: "a domain of an allowed address", creator: limited, p: NewKeyParams{AllowRecipients: []string{"example.org"}}, refused: true},
		{name: "a higher hourly cap", creator: limited, p: NewKeyParams{MaxPerHour: 6}, refused: true},
		{name: "a higher daily cap", creator: limited, p: NewKeyParams{MaxPerDay: 21}, refused: true},
		{name: "a higher own rate limit", creator: limited, p: NewKeyParams{RateLimit: 11}, refused: true},
		{name: "above the server's limit", creator: free, p: NewKeyParams{RateLimit: 101}, refused: true},
		{name: "no rate limit", creator: free, p: NewKeyParams{RateLimit: -1}, refused: true},
		{name: "a scope it lacks", creator: &core.APIKey{Tenant: "t4", Scopes: []core.Scope{core.ScopeRead, core.ScopeAdmin}},
			p: NewKeyParams{Scopes: []core.Scope{core.ScopeSend}}, refused: true},
		{name: "one scope of two it lacks", creator: &core.APIKey{Tenant: "t4", Scopes: []core.Scope{core.ScopeSend}},
			p: NewKeyParams{Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}}, refused: true},
		{name: "scopes it has", creator: &core.APIKey{Tenant: "t4", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}},
			p:    NewKeyParams{Scopes: []core.Scope{core.ScopeRead}},
			want: NewKeyParams{Tenant: "t4", Scopes: []core.Scope{core.ScopeRead}, AllowRecipients: []string{}}},
		{name: "a free creator grants what it asks", creator: free, p: NewKeyParams{Mailboxes: []string{"c"}, MaxPerHour: 9, RateLimit: 100},
			want: NewKeyParams{Tenant: "t2", Mailboxes: []string{"c"}, AllowRecipients: []string{}, MaxPerHour: 9, RateLimit: 100}},
		{name: "an unlimited creator grants any limit", creator: unlimited, p: NewKeyParams{RateLimit: 1000},
			want: NewKeyParams{Tenant: "t3", AllowRecipients: []string{}, RateLimit: 1000}},
		{name: "an unlimited creator's child takes the server's", creator: unlimited, p: NewKeyParams{},
			want: NewKeyParams{Tenant: "t3", AllowRecipients: []string{}}},
	} {
		got, err := s.inherit(c.creator, c.p)
		switch {
		case c.refused:
			if core.ErrorCode(err) != core.CodeForbidden {
				t.Errorf("%s: %v, want forbidden (403)", c.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !reflect.DeepEqual(got, c.want):
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
