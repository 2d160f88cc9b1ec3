package idempotency

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// The memo answers exactly what Fingerprint answers: for the same bytes,
// for bodies that are the same JSON spelled differently, and for bodies
// that are different JSON; it refuses what Fingerprint refuses.
func TestFingerprintMemo_SameAnswersAsFingerprint(t *testing.T) {
	m := NewFingerprintMemo(8)
	bodies := []string{
		`{"to":"a@example.com","subject":"hi"}`,
		`{"subject":"hi","to":"a@example.com"}`, // same JSON, other bytes
		`{"to":"a@example.com","subject":"hi!"}`,
		`{"n":1.0}`, `{"n":1}`, `[1,2,3]`,
	}
	for round := range 3 { // the first round fills the memo, the others hit it
		for _, b := range bodies {
			want, err := Fingerprint([]byte(b))
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Fingerprint([]byte(b))
			if err != nil || got != want {
				t.Fatalf("round %d, %s: memo %q, %v; Fingerprint %q", round, b, got, err, want)
			}
		}
	}
	for _, bad := range []string{``, `{"a":1,"a":2}`, `{"a":1} x`, "{\"a\":\"\xff\"}"} {
		for range 2 {
			if _, err := m.Fingerprint([]byte(bad)); !errors.Is(err, ErrNotJSON) {
				t.Fatalf("%q: err = %v, want ErrNotJSON", bad, err)
			}
		}
	}
}

// The memo stays within its capacity however many bodies pass, and keeps
// the fingerprints still in use.
func TestFingerprintMemo_Bounded(t *testing.T) {
	m := NewFingerprintMemo(100)
	hot := []byte(`{"hot":true}`)
	for i := range 10_000 {
		if _, err := m.Fingerprint(fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := m.Fingerprint(hot); err != nil {
				t.Fatal(err)
			}
		}
		if n := m.Len(); n > 100 {
			t.Fatalf("after %d bodies the memo holds %d, capacity 100", i+1, n)
		}
	}
	m.mu.Lock()
	_, inCur := m.cur[sha256.Sum256(hot)]
	_, inOld := m.old[sha256.Sum256(hot)]
	m.mu.Unlock()
	if !inCur && !inOld {
		t.Fatal("a body fingerprinted every 10th request was dropped")
	}
}

func TestFingerprintMemo_Concurrent(t *testing.T) {
	m := NewFingerprintMemo(16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				b := fmt.Appendf(nil, `{"g":%d,"i":%d}`, g%2, i%20)
				want, _ := Fingerprint(b)
				if got, err := m.Fingerprint(b); err != nil || got != want {
					t.Errorf("%s: %q, %v, want %q", b, got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A retry's bytes, fingerprinted from the memo, against canonicalising
// them again (BenchmarkFingerprint).
func BenchmarkFingerprintMemo_Hit(b *testing.B) {
	body := []byte(fingerprintBenchBody)
	m := NewFingerprintMemo(DefaultFingerprintMemo)
	if _, err := m.Fingerprint(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Fingerprint(body); err != nil {
			b.Fatal(err)
		}
	}
}
