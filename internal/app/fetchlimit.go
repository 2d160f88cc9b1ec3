package app

import (
	"context"
	"io"

	"github.com/sendonce/sendonce/internal/core"
)

// Downloads of attachments by path (--attachment-fetch) are bounded like
// request bodies: a small request naming a 40 MiB file would otherwise
// hold 40 MiB that no bound saw, and any number of them at once.

// MaxConcurrentFetches is how many attachment downloads one process runs
// at once; a send that finds them all busy waits for one (within
// FetchTimeout), then is answered 503.
const MaxConcurrentFetches = 4

// fetchStep is how much of a download is charged against the memory
// bound at a time: the bytes are counted as they arrive, not trusted
// from a Content-Length.
const fetchStep = 256 << 10

// MemoryCharge is the request's room in the process's in-flight memory
// bound (--max-inflight-bytes): ChargeMemory adds n bytes to it until the
// request ends, or returns a core.CodeUnavailable error when no room
// comes in time.
type MemoryCharge interface {
	ChargeMemory(ctx context.Context, n int64) error
}

type chargeKey struct{}

// MemoryChargeKey is the context key of the request's charge. The HTTP
// layer, which owns the bound, keeps each request's state in one context
// value that answers this key itself (one context per request, not one
// per fact); WithMemoryCharge is the general way.
var MemoryChargeKey any = chargeKey{}

// WithMemoryCharge returns ctx carrying the request's charge; downloads
// made for the request add to it.
func WithMemoryCharge(ctx context.Context, c MemoryCharge) context.Context {
	return context.WithValue(ctx, chargeKey{}, c)
}

func memoryCharge(ctx context.Context) MemoryCharge {
	c, _ := ctx.Value(chargeKey{}).(MemoryCharge)
	return c
}

// fetchSlot takes one of the process's download slots; release gives it
// back.
func (s *Service) fetchSlot(ctx context.Context) (release func(), err error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	select {
	case s.fetches <- struct{}{}:
		return func() { <-s.fetches }, nil
	case <-ctx.Done():
		return nil, core.Errorf(core.CodeUnavailable, "", "too many attachments are being fetched at once; retry later")
	}
}

// chargedReader charges what it reads, a step ahead, to the request's
// memory bound.
type chargedReader struct {
	ctx     context.Context
	r       io.Reader
	charge  MemoryCharge
	read    int64
	charged int64
}

func (c *chargedReader) Read(p []byte) (int, error) {
	if c.charge != nil && c.read+int64(len(p)) > c.charged {
		step := max(int64(fetchStep), c.read+int64(len(p))-c.charged)
		if err := c.charge.ChargeMemory(c.ctx, step); err != nil {
			return 0, err
		}
		c.charged += step
	}
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}
