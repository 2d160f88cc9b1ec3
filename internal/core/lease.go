package core

import "time"

// Lease is how long a claimed send's attempt may hold it before the
// rescuer calls it unknown: Base, grown by PerMiB for each MiB of the
// bytes the attempt hands over, by at most MaxGrowth. The bytes are the
// send's files, submitted message and forward as stored (the bodies are
// small beside them); the store computes them as it claims. A 14 MB
// message on a slow or loaded link outlasts a lease made for a short one;
// a lease it cannot fit in ends it unknown although the relay may take it.
type Lease struct {
	Base, PerMiB, MaxGrowth time.Duration
}

// For is the lease of an attempt handing over size bytes.
func (l Lease) For(size int64) time.Duration {
	if size <= 0 || l.PerMiB <= 0 || l.MaxGrowth <= 0 {
		return l.Base
	}
	// Below the cap the product fits: MaxGrowth/PerMiB MiB at most.
	if size >= int64(l.MaxGrowth/l.PerMiB+1)<<20 {
		return l.Base + l.MaxGrowth
	}
	return l.Base + min(time.Duration(size)*l.PerMiB>>20, l.MaxGrowth)
}
