package sqlstore

import (
	"context"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

// maxStreamSenders bounds the From addresses StreamSenderCounts returns:
// the guard sums them by domain, and a window of more distinct addresses
// than this is judged as the tenant's whole stream only (app.judgeStream).
const maxStreamSenders = 1000

// StreamSenderCounts implements core.Store.
func (s *Store) StreamSenderCounts(ctx context.Context, p core.StreamWindowParams) ([]core.SenderCounts, error) {
	return countSenders(ctx, s.r, p)
}

// StreamSenderCounts implements core.Tx.
func (t *Tx) StreamSenderCounts(ctx context.Context, p core.StreamWindowParams) ([]core.SenderCounts, error) {
	return countSenders(ctx, t.q, p)
}

// countSenders is countStream per From address: the sends by one grouped
// range of the partial index sends_bulk_sent_from (migration 0039, which
// holds the address: no table row is read), the outcomes by outcomesSQL.
func countSenders(ctx context.Context, q querier, p core.StreamWindowParams) ([]core.SenderCounts, error) {
	if !p.Stream.Valid() {
		return nil, fmt.Errorf("count senders: unknown stream %q", p.Stream)
	}
	var out []core.SenderCounts
	at := map[string]int{}
	get := func(from string) *core.SenderCounts {
		i, ok := at[from]
		if !ok {
			i = len(out)
			at[from] = i
			out = append(out, core.SenderCounts{From: from})
		}
		return &out[i]
	}
	if err := scanGrouped[string](ctx, q, senderSendsSQL(p.Stream), false, []any{p.Tenant, micros(p.Since), maxStreamSenders + 1}, func(from, _ string, n int) {
		get(from).Sends = n
	}); err != nil {
		return nil, err
	}
	if len(out) > maxStreamSenders {
		return nil, nil // too many to tell apart: core.Reputation says nil
	}
	w := []any{p.Tenant, string(p.Stream), micros(p.Since)}
	if err := scanGrouped[string](ctx, q, outcomesSQL("s.from_addr"), true, append(w, w...), func(from, kind string, n int) {
		addOutcome(&get(from).StreamCounts, kind, n)
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// senderSendsSQL counts the stream's sends handed off since a time per
// From address. The stream is a literal, as in streamSendsSQL.
func senderSendsSQL(stream core.Stream) string {
	return `SELECT from_addr, count(*) FROM sends WHERE tenant = ? AND stream = '` + string(stream) + `'
		AND sent_at IS NOT NULL AND sent_at >= ? GROUP BY from_addr LIMIT ?`
}
