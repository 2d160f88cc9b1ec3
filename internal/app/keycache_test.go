package app_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/server"
)

// pausingStore is the real store whose first APIKey read, once armed,
// stops after reading until released: the window in which a revocation
// can commit between an authentication's read and its cache fill.
type pausingStore struct {
	core.Store
	once    sync.Once
	armed   chan struct{}
	read    chan struct{}
	release chan struct{}
}

func (p *pausingStore) APIKey(ctx context.Context, id string) (*core.APIKey, error) {
	k, err := p.Store.APIKey(ctx, id)
	select {
	case <-p.armed:
		p.once.Do(func() {
			close(p.read)
			<-p.release
		})
	default:
	}
	return k, err
}

// TestAuthenticate_RevocationWinsOverAConcurrentFill: an authentication
// that read the key before the revocation committed must not put the old
// record back into the cache, where it would work for another second.
func TestAuthenticate_RevocationWinsOverAConcurrentFill(t *testing.T) {
	ctx := context.Background()
	srv := sqliteServer(t, server.Config{Transport: "capture"})
	ps := &pausingStore{Store: srv.Store, armed: make(chan struct{}), read: make(chan struct{}), release: make(chan struct{})}
	svc := app.New(ps, app.Config{}, nil)
	key, secret, err := svc.CreateKey(ctx, app.NewKeyParams{Name: "k", Scopes: []core.Scope{core.ScopeSend}})
	if err != nil {
		t.Fatal(err)
	}

	close(ps.armed)
	done := make(chan error, 1)
	go func() {
		_, err := svc.Authenticate(ctx, secret)
		done <- err
	}()
	select {
	case <-ps.read:
	case <-time.After(10 * time.Second):
		t.Fatal("the authentication never read the key")
	}
	if err := svc.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	close(ps.release)
	if err := <-done; err != nil {
		t.Fatalf("the racing authentication (read before the revocation): %v", err)
	}
	if _, err := svc.Authenticate(ctx, secret); !errors.Is(err, app.ErrUnauthorized) {
		t.Fatalf("Authenticate after the revocation = %v, want ErrUnauthorized", err)
	}
}
