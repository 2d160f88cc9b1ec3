package app

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/core"
)

// PreviewRunes is the most characters a received message's preview holds.
const PreviewRunes = 200

// MaxThreadPage is the most messages one read of a thread returns.
const MaxThreadPage = 100

// Preview is what lists show of a received message instead of its
// bodies: the start of its text (else of its HTML without tags), spaces
// folded, at most PreviewRunes characters.
func Preview(text, html string) string {
	src, tags := text, false
	if strings.TrimSpace(src) == "" {
		src, tags = html, true
	}
	var b strings.Builder
	n, inTag, space := 0, false, false
	for _, r := range src {
		switch {
		case tags && r == '<':
			inTag = true
			continue
		case tags && r == '>':
			inTag, space = false, true
			continue
		case inTag:
			continue
		case unicode.IsSpace(r) || unicode.IsControl(r):
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
			n++
		}
		space = false
		if n >= PreviewRunes {
			break
		}
		b.WriteRune(r)
		n++
		if n >= PreviewRunes {
			break
		}
	}
	return strings.TrimRightFunc(strings.ToValidUTF8(b.String(), string(utf8.RuneError)), unicode.IsSpace)
}

// ThreadPage is one page of a thread's messages, oldest first: the items
// after the cursor (an item id; "" for the first page), at most limit of
// them (MaxThreadPage when limit is 0 or more), and, of its received
// messages, their metadata and preview without bodies, by id. A body is
// read one message at a time (ReceivedMessage).
type ThreadPage struct {
	Items    []core.ThreadItem
	Received map[string]*core.ReceivedMessage
	// Next is the cursor of the next page: the last item's id; "" on
	// the last page.
	Next string
}

// ThreadPage reads one page of the thread key may see.
func (s *Service) ThreadPage(ctx context.Context, key *core.APIKey, id, after string, limit int) (*ThreadPage, error) {
	items, err := s.ThreadItems(ctx, key, id)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxThreadPage {
		limit = MaxThreadPage
	}
	if after != "" {
		i := 0
		for i < len(items) && items[i].ID != after {
			i++
		}
		if i == len(items) {
			return nil, core.Errorf(core.CodeValidation, "after", "after is not a message of the thread")
		}
		items = items[i+1:]
	}
	p := &ThreadPage{Items: items, Received: map[string]*core.ReceivedMessage{}}
	if len(items) > limit {
		p.Items, p.Next = items[:limit], items[limit-1].ID
	}
	var ids []string
	for _, it := range p.Items {
		if it.Kind == core.ThreadReceived {
			ids = append(ids, it.ID)
		}
	}
	if len(ids) == 0 {
		return p, nil
	}
	ms, _, err := s.store.ListReceived(ctx, key.Tenant, core.ReceivedFilter{ThreadID: id, IDs: ids, Limit: len(ids)})
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		p.Received[m.ID] = m
	}
	return p, nil
}
