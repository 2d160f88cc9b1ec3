package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sendonce/sendonce/internal/core"
)

// newEventID returns a stable event id, ordered by the event's time.
func newEventID(at time.Time) string {
	if at.IsZero() {
		at = time.Now()
	}
	return "evt_" + strings.ToLower(ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String())
}

func encodeBounce(b *core.Bounce) (string, error) {
	if b == nil {
		return "", nil
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("encode bounce: %w", err)
	}
	return string(raw), nil
}

func decodeBounce(s string) (*core.Bounce, error) {
	if s == "" {
		return nil, nil
	}
	var b core.Bounce
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		return nil, fmt.Errorf("decode bounce: %w", err)
	}
	return &b, nil
}
