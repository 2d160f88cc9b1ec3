// Package defaults fills in configuration left unset. Throughout
// sendonce a zero or negative number or duration, and an empty string,
// mean "the default": a Config literal names only what it changes.
package defaults

import "cmp"

// Set gives *p the default def when *p is unset: not above T's zero
// value (0 or a negative number, or "").
func Set[T cmp.Ordered](p *T, def T) {
	var zero T
	if *p <= zero {
		*p = def
	}
}

// Or is v, or def when v is unset (as for Set).
func Or[T cmp.Ordered](v, def T) T {
	Set(&v, def)
	return v
}
