package imapsync

import (
	"errors"
	"fmt"
	"slices"

	"github.com/emersion/go-imap/v2"
)

// A server's SEARCH answer is a stranger's data: "1:4294967295" is 22
// bytes and names four billion messages, and "0" or "*" is no message at
// all (go-imap reads both as its "*", which its AllUIDs cannot expand).
// The answer is therefore walked range by range, never expanded: clamped
// to the UIDs that can be new (after the last one seen, before UIDNEXT),
// counted by arithmetic, and at most a pass's worth of them taken in one pass.

// errBadUIDSet: the server named UID 0 or "*" in a search result.
var errBadUIDSet = errors.New("the server's search answer names UID 0 or *")

// uidWindow is what a search answer is clamped to and checked against.
type uidWindow struct {
	after uint32 // UIDs at most this are not new
	next  uint32 // the folder's UIDNEXT: UIDs from it on do not exist yet (0: unknown)
	// holds is how many messages the folder has (SELECT's EXISTS): a
	// search cannot find more. 0 with next 0: unknown, not checked.
	holds uint32
	// slack allows for messages delivered between SELECT and SEARCH.
	slack uint32
}

// pickUIDs returns the lowest take UIDs of set inside w, ascending, each
// once, and whether more were left for a next pass. It refuses a set that
// names UID 0 or "*", that is not a UID set, or that names more messages
// than the folder holds. Its work is bounded by the number of ranges (the
// answer's length) and take, never by the numbers in them.
func pickUIDs(set imap.NumSet, w uidWindow, take int) (uids []imap.UID, more bool, err error) {
	if set == nil {
		return nil, false, nil
	}
	us, ok := set.(imap.UIDSet)
	if !ok {
		return nil, false, errors.New("the server's search answer is not a UID set")
	}
	lo, hi := uint64(w.after)+1, uint64(1)<<32-1
	if w.next > 0 {
		hi = uint64(w.next) - 1
	}
	ranges := make([][2]uint64, 0, len(us))
	for _, r := range us {
		if r.Start == 0 || r.Stop == 0 {
			return nil, false, errBadUIDSet
		}
		a, b := uint64(r.Start), uint64(r.Stop)
		if a > b {
			a, b = b, a
		}
		a, b = max(a, lo), min(b, hi)
		if a <= b {
			ranges = append(ranges, [2]uint64{a, b})
		}
	}
	slices.SortFunc(ranges, func(x, y [2]uint64) int {
		switch {
		case x[0] < y[0]:
			return -1
		case x[0] > y[0]:
			return 1
		}
		return 0
	})
	// Walk the sorted ranges once: a cursor skips what overlapping ranges
	// named already, so a UID is counted and taken once.
	var (
		count  uint64
		cursor = lo
	)
	for _, r := range ranges {
		a := max(r[0], cursor)
		if a > r[1] {
			continue
		}
		count += r[1] - a + 1
		for u := a; u <= r[1] && len(uids) < take; u++ {
			uids = append(uids, imap.UID(u))
		}
		if len(uids) == take && uint64(uids[len(uids)-1]) < r[1] {
			more = true
		}
		cursor = r[1] + 1
	}
	if w.holds > 0 || w.next > 0 {
		if limit := uint64(w.holds) + uint64(w.slack); count > limit {
			return nil, false, fmt.Errorf("the server's search answer names %d new messages in a folder of %d", count, w.holds)
		}
	}
	if uint64(len(uids)) < count {
		more = true
	}
	return uids, more, nil
}

// anyUID reports whether set names a message, refusing UID 0 and "*" as
// pickUIDs does, without expanding it.
func anyUID(set imap.NumSet) (bool, error) {
	uids, _, err := pickUIDs(set, uidWindow{}, 1)
	return len(uids) > 0, err
}
