package mxserver

import (
	"errors"
	"io"

	"golang.org/x/sync/semaphore"
)

// errBudget is a message that would take the listener past its memory
// budget.
var errBudget = errors.New("inbound memory budget spent")

// budgetChunk is the first reservation of a message and the least one
// reservation grows by: small mail (most of it) takes one.
const budgetChunk = 64 << 10

// budget bounds the bytes of messages held by all sessions together:
// without it, MaxConns sessions each reading a message of MaxBytes hold
// MaxConns × MaxBytes (1 GB at the defaults), more while they parse it.
// A session reserves its buffer's capacity before it grows it and gives
// it back once the message is stored; what cannot be reserved at once is
// refused (the sender tries again later), never waited for, so a slow
// sender cannot make others wait on its reservation.
type budget struct {
	sem *semaphore.Weighted
}

func newBudget(max int64) *budget { return &budget{sem: semaphore.NewWeighted(max)} }

// readAll reads r to its end into a buffer reserved from the budget, at
// most a chunk more than limit bytes (the data reader refuses past max).
// release gives the reservation back; it is to be called (once) whatever
// the error, after the last use of the bytes.
func (b *budget) readAll(r io.Reader, limit int64) (raw []byte, release func(), err error) {
	var held int64
	release = func() {
		if held > 0 {
			b.sem.Release(held)
			held = 0
		}
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			grow := min(max(int64(cap(buf)), budgetChunk), limit+budgetChunk-int64(cap(buf)))
			if grow <= 0 {
				grow = budgetChunk
			}
			if !b.sem.TryAcquire(grow) {
				return nil, release, errBudget
			}
			held += grow
			next := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(next, buf)
			buf = next
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(rerr, io.EOF) {
			return buf, release, nil
		}
		if rerr != nil {
			return nil, release, rerr
		}
	}
}
