package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// liveMaxDuration bounds one event stream; the browser's EventSource
// reconnects by itself, and the server's write timeout is lifted only this
// far.
const liveMaxDuration = 5 * time.Minute

// liveRow is one rendered row of a live list.
type liveRow struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// live streams a list as server-sent events: every row at first, then
// each row that is new or changed, looked for every LivePoll. The page's
// script puts each row in place by its id.
func (d *Dashboard) live(q *req, rows func(ctx context.Context) ([]liveRow, error)) error {
	rc := http.NewResponseController(q.w)
	if err := rc.SetWriteDeadline(time.Now().Add(liveMaxDuration + 10*time.Second)); err != nil && err != http.ErrNotSupported {
		return fmt.Errorf("live: %w", err)
	}
	ctx, cancel := context.WithTimeout(q.ctx(), liveMaxDuration)
	defer cancel()
	h := q.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	q.w.WriteHeader(http.StatusOK)
	seen := map[string]string{}
	tick := time.NewTicker(d.cfg.LivePoll)
	defer tick.Stop()
	for {
		list, err := rows(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err // headers are sent: this ends the stream, the browser retries
		}
		for i := len(list) - 1; i >= 0; i-- { // oldest first, so that prepending keeps the order
			row := list[i]
			if seen[row.ID] == row.HTML {
				continue
			}
			seen[row.ID] = row.HTML
			b, err := json.Marshal(row)
			if err != nil {
				return fmt.Errorf("live: %w", err)
			}
			if _, err := fmt.Fprintf(q.w, "event: row\ndata: %s\n\n", b); err != nil {
				return nil // the browser went away
			}
		}
		if _, err := fmt.Fprint(q.w, ": tick\n\n"); err != nil {
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.done:
			return nil
		case <-tick.C:
		}
	}
}
