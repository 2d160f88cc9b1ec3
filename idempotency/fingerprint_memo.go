package idempotency

import (
	"crypto/sha256"
	"sync"
)

// FingerprintMemo remembers the fingerprints of recent request bodies,
// keyed by the SHA-256 of their exact bytes. A retry sends the same bytes
// as its first request, and hashing them costs a tenth of canonicalising
// them (RFC 8785 parses the whole body and allocates per value), so a
// replay storm is answered without canonicalising anything twice.
//
// Bodies that differ in any byte are canonicalised on their own, so the
// memo never changes a fingerprint: it returns what Fingerprint returns.
// Errors are not remembered (they are cheap to find again and rare).
//
// It holds at most its capacity of entries (about 130 bytes each) in two
// generations: when the newer fills up, the older is dropped. It is safe
// for concurrent use.
type FingerprintMemo struct {
	mu       sync.Mutex
	cur, old map[[sha256.Size]byte]string
	half     int
}

// DefaultFingerprintMemo is the capacity servers use: about 2 MiB.
const DefaultFingerprintMemo = 16384

// NewFingerprintMemo returns a memo of at most capacity entries (at least 2).
func NewFingerprintMemo(capacity int) *FingerprintMemo {
	half := max(capacity/2, 1)
	return &FingerprintMemo{cur: make(map[[sha256.Size]byte]string, half), half: half}
}

// Fingerprint returns Fingerprint(body), from the memo when these bytes
// were fingerprinted recently.
func (m *FingerprintMemo) Fingerprint(body []byte) (string, error) {
	sum := sha256.Sum256(body)
	m.mu.Lock()
	fp, ok := m.cur[sum]
	if !ok {
		if fp, ok = m.old[sum]; ok {
			m.putLocked(sum, fp) // still in use: keep it past the next turnover
		}
	}
	m.mu.Unlock()
	if ok {
		return fp, nil
	}
	fp, err := Fingerprint(body)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.putLocked(sum, fp)
	m.mu.Unlock()
	return fp, nil
}

func (m *FingerprintMemo) putLocked(sum [sha256.Size]byte, fp string) {
	if len(m.cur) >= m.half {
		m.old, m.cur = m.cur, make(map[[sha256.Size]byte]string, m.half)
	}
	m.cur[sum] = fp
}

// Len is how many fingerprints the memo holds.
func (m *FingerprintMemo) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cur) + len(m.old)
}
