package mxserver

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestBudget_ConcurrentMessagesShareIt: while one session holds part of
// a message, another cannot take more than what is left; once the first
// gives its reservation back, it can. (io.Pipe makes "holds" exact: a
// write returns only when the reader has taken the bytes into the
// buffer it reserved.)
func TestBudget_ConcurrentMessagesShareIt(t *testing.T) {
	b := newBudget(256 << 10)
	pr, pw := io.Pipe()
	type result struct {
		raw     []byte
		release func()
		err     error
	}
	first := make(chan result, 1)
	go func() {
		raw, release, err := b.readAll(pr, 10<<20)
		first <- result{raw, release, err}
	}()
	if _, err := pw.Write(make([]byte, 150<<10)); err != nil { // held: 256 KiB reserved
		t.Fatal(err)
	}
	_, release, err := b.readAll(bytes.NewReader(make([]byte, 100<<10)), 10<<20)
	release()
	if !errors.Is(err, errBudget) {
		t.Fatalf("a second message while the first holds the budget: %v, want errBudget", err)
	}
	pw.Close()
	r := <-first
	if r.err != nil || len(r.raw) != 150<<10 {
		t.Fatalf("first message: %d bytes, %v", len(r.raw), r.err)
	}
	r.release()
	raw, release, err := b.readAll(bytes.NewReader(make([]byte, 100<<10)), 10<<20)
	release()
	if err != nil || len(raw) != 100<<10 {
		t.Fatalf("a message once the first gave its reservation back: %d bytes, %v", len(raw), err)
	}
}
