// Package lifecycle starts a process's parts in one order and stops them
// in the reverse one: the delivery queue, the webhook and IMAP workers,
// the listeners. One list, so that what starts and what stops cannot
// drift apart, and a part that fails to start stops those before it.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Service is one part of a process.
type Service interface {
	// Start begins its work and returns once it is under way (a
	// listener bound, a loop running); an error means nothing of it runs.
	Start(ctx context.Context) error
	// Stop ends its work, waiting for what is in flight within ctx.
	Stop(ctx context.Context) error
}

// Funcs makes a Service of two functions; either may be nil.
type Funcs struct {
	OnStart func(ctx context.Context) error
	OnStop  func(ctx context.Context) error
}

func (f Funcs) Start(ctx context.Context) error {
	if f.OnStart == nil {
		return nil
	}
	return f.OnStart(ctx)
}

func (f Funcs) Stop(ctx context.Context) error {
	if f.OnStop == nil {
		return nil
	}
	return f.OnStop(ctx)
}

// Group is an ordered list of named services. Its zero value is ready.
type Group struct {
	mu      sync.Mutex
	list    []entry
	started int // the first started entries are running
}

type entry struct {
	name string
	svc  Service
}

// Add appends services to the list; they start after those added before.
// Adding to a started group is an error of the caller's and panics.
func (g *Group) Add(name string, s Service) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started > 0 {
		panic("lifecycle: Add after Start")
	}
	g.list = append(g.list, entry{name, s})
}

// Start starts every service in order. When one fails, those started
// before it are stopped (in reverse order, within ctx) and its error is
// returned, named.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.started < len(g.list) {
		e := g.list[g.started]
		if err := e.svc.Start(ctx); err != nil {
			return errors.Join(fmt.Errorf("start %s: %w", e.name, err), g.stopLocked(ctx))
		}
		g.started++
	}
	return nil
}

// Stop stops the started services in reverse order, every one even when
// another fails, and joins their errors. A second Stop does nothing.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopLocked(ctx)
}

func (g *Group) stopLocked(ctx context.Context) error {
	var errs []error
	for g.started > 0 {
		g.started--
		e := g.list[g.started]
		if err := e.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", e.name, err))
		}
	}
	return errors.Join(errs...)
}

// Sleep waits d, or until ctx ends (the part is stopping); it reports
// whether it waited all of d. A part's loop pauses with it so that Stop
// never waits out a pause.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
