package sqlstore

import (
	"context"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
)

// fill takes every waiting foreground write, and background writes only
// within their share while foreground ones are there: delivery cannot
// take the one writer from the accepts waiting on it, yet moves in every
// batch, and has the writer to itself when nothing else waits.
func TestGroupCommit_BackgroundShare(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		firstBackground      bool
		waitingFG, waitingBG int
		wantFG, wantBG       int
	}{
		{"both waiting", false, 39, 40, 40, 10},
		{"more than a batch of accepts", false, 99, 40, 64, 16},
		{"few accepts: still one background", false, 1, 10, 2, 1},
		{"background alone fills the batch", true, 0, 99, 0, 64},
		{"a background write first counts in the share", true, 8, 40, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &groupCommit{maxBatch: 64, reqs: make(chan *txReq, 200), low: make(chan *txReq, 200)}
			fg := &txReq{ctx: context.Background()}
			bg := &txReq{ctx: core.Background(context.Background())}
			for range tc.waitingFG {
				g.reqs <- fg
			}
			for range tc.waitingBG {
				g.low <- bg
			}
			first := fg
			if tc.firstBackground {
				first = bg
			}
			batch := g.fill(append(make([]*txReq, 0, 80), first))
			gotFG, gotBG := 0, 0
			for _, r := range batch {
				if r == bg {
					gotBG++
				} else {
					gotFG++
				}
			}
			if gotFG != tc.wantFG || gotBG != tc.wantBG {
				t.Fatalf("batch holds %d foreground and %d background writes, want %d and %d", gotFG, gotBG, tc.wantFG, tc.wantBG)
			}
		})
	}
}
