package delivery

import (
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// A claim gives each send a lease grown with its size (core.Lease): a
// large message on a slow or loaded link takes longer to hand over than
// the base lease (--attempt-lease), and an attempt cut off by its lease
// mid-DATA ends unknown although the relay may well take the message.
// The attempt's budget and the rescuer both go by the send's own lease.

// Defaults of the lease's growth with the bytes handed over.
const (
	// DefaultLeasePerMiB is 2 s per stored MiB: a floor rate of 512 KiB/s
	// of stored bytes, some 700 KiB/s on the wire once base64 has grown
	// the files by a third.
	DefaultLeasePerMiB = 2 * time.Second
	// DefaultMaxLeaseGrowth caps the growth at RFC 5321's 10 minutes for
	// the reply to the end of DATA; 40 MiB (the largest message) grows
	// the lease by 80 s.
	DefaultMaxLeaseGrowth = 10 * time.Minute
)

// lease is what ClaimDue gives each send it claims.
func (d *Deliverer) lease() core.Lease {
	return core.Lease{Base: d.cfg.AttemptLease, PerMiB: d.cfg.LeasePerMiB, MaxGrowth: DefaultMaxLeaseGrowth}
}

// maxLease is the longest lease a claim gives (the mx transport's DATA
// timeout is bounded by its budget).
func (d *Deliverer) maxLease() time.Duration {
	l := d.lease()
	return l.Base + l.MaxGrowth
}

// leaseOf is the lease the claim gave s: from the claim (its updated_at)
// to its lease_until; the base lease when it has none that long.
func (d *Deliverer) leaseOf(s *core.Send) time.Duration {
	if s.LeaseUntil == nil {
		return d.cfg.AttemptLease
	}
	return max(s.LeaseUntil.Sub(s.UpdatedAt), d.cfg.AttemptLease)
}
