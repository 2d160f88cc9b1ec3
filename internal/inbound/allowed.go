package inbound

import (
	"fmt"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// allowed keeps the changes the report's bounce address may speak for. A
// recipient reads the address in its copy's Return-Path and can mail a
// forged report to it, so the address is trusted for the recipients its
// transaction carried, and no further:
//   - bound to one recipient (one transaction carried that recipient
//     alone): that recipient's changes; a report about anyone else
//     changes nothing;
//   - the send's own address of a single-recipient send: its recipient
//     (the only one there is);
//   - the send's own address of a send with several recipients (one
//     transaction carried them all, or an older version sent it): any of
//     them could have written the report, so it changes nothing and is
//     kept for review among the unmatched items.
//
// why says why nothing is left.
func allowed(send *core.Send, bound int, changes []change) ([]change, string) {
	rcpts := app.RecipientsOf(send)
	var only string
	switch {
	case bound >= 0 && bound < len(rcpts):
		only = rcpts[bound]
	case bound >= 0:
		return nil, "the bounce address names a recipient the send does not have"
	case len(rcpts) == 1:
		only = rcpts[0]
	default:
		return nil, fmt.Sprintf("the report came to the bounce address the send's %d recipients share, so any of them could have written it: not applied", len(rcpts))
	}
	var out []change
	for _, c := range changes {
		if c.Address == only {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, "the report names a recipient other than the one its bounce address was made for: not applied"
	}
	return out, ""
}
