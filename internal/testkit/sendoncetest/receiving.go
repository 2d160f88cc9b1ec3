package sendoncetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// OwnDomain adds the domain of address (an address or a bare domain) to
// tenant's domains unless the tenant has it, as POST /v1/domains does:
// a tenant receives only on its own domains. The key is Ed25519, quick
// to make.
func (e *Env) OwnDomain(t testing.TB, tenant, address string) {
	t.Helper()
	domain := address[strings.LastIndexByte(address, '@')+1:]
	ctx, svc := context.Background(), e.Server.Service
	if _, err := svc.Domain(ctx, tenant, domain); err == nil {
		return
	} else if !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("domain %s: %v", domain, err)
	}
	d, err := svc.PrepareDomain(app.AddDomainParams{Tenant: tenant, Domain: domain, Algorithm: "ed25519"})
	if err != nil {
		t.Fatalf("prepare domain %s: %v", domain, err)
	}
	if err := svc.InTx(ctx, func(tx core.Tx) error { return svc.AddDomain(ctx, tx, d) }); err != nil {
		t.Fatalf("add domain %s: %v", domain, err)
	}
}

// NewInbox makes address a receiving inbox of tenant, named name, owning
// its domain first (OwnDomain): the setup of every test that receives
// mail through app.Service.Receive.
func (e *Env) NewInbox(t testing.TB, tenant, address, name string) *core.Mailbox {
	t.Helper()
	e.OwnDomain(t, tenant, address)
	ctx, svc := context.Background(), e.Server.Service
	var inbox *core.Mailbox
	if err := svc.InTx(ctx, func(tx core.Tx) (err error) {
		inbox, err = svc.CreateInbox(ctx, tx, tenant, address, name)
		return err
	}); err != nil {
		t.Fatalf("create inbox %s: %v", address, err)
	}
	return inbox
}

// Receive takes raw for inbox as its SMTP listener would, and returns the
// received message.
func (e *Env) Receive(t testing.TB, inbox *core.Mailbox, raw string) app.Received {
	t.Helper()
	r, err := e.Server.Service.Receive(context.Background(), app.Incoming{Tenant: inbox.Tenant, MailboxID: inbox.ID, Source: "smtp", Raw: []byte(raw)})
	if err != nil {
		t.Fatalf("receive for %s: %v", inbox.Address, err)
	}
	return r
}
