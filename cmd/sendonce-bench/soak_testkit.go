package main

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
)

// kitT lets the soak, a program, run the project's test servers
// (internal/testkit: smtptest's exchangers with their limits, dnstest's
// resolver), which take a testing.TB. They are the real servers the mx
// tests use; writing the soak its own copies would test the copies. A
// failure they report while starting ends the start with an error
// (through a panic that start recovers, as t.Fatal ends a test), one they
// report later is logged; their cleanups run at close, last in first out.
//
// The embedded testing.TB is nil: only the methods below are called by
// those packages (a call of another would panic, and show at once).
type kitT struct {
	testing.TB
	logger *slog.Logger

	mu       sync.Mutex
	cleanups []func()
	errs     []string
}

// kitFatal is what Fatal and Fatalf panic with.
type kitFatal struct{ msg string }

func newKitT(logger *slog.Logger) *kitT { return &kitT{logger: logger} }

func (t *kitT) Helper() {}

func (t *kitT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *kitT) Logf(format string, args ...any) {
	t.logger.Debug(fmt.Sprintf(format, args...))
}

func (t *kitT) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.logger.Warn(msg)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, msg)
}

func (t *kitT) Fatal(args ...any) { panic(kitFatal{fmt.Sprint(args...)}) }

func (t *kitT) Fatalf(format string, args ...any) { panic(kitFatal{fmt.Sprintf(format, args...)}) }

// start runs f, which starts test servers with t, and turns a Fatal
// inside it into an error.
func (t *kitT) start(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			kf, ok := r.(kitFatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("soak: %s", kf.msg)
		}
	}()
	f()
	return nil
}

// close runs the cleanups, the last registered first.
func (t *kitT) close() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
