package sqlstore

import (
	"context"
	"fmt"
	"net/mail"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

const insertAddressHead = `INSERT INTO send_addresses (tenant, address, send_id) VALUES `

// sendAddresses are the distinct bare addresses of s's to, cc and bcc,
// normalized as GET /v1/sends?recipient= looks them up. An address that
// does not parse (none reaches the store: the app parsed them all) is
// indexed as it is written.
func sendAddresses(s *core.Send) []string {
	out := make([]string, 0, len(s.To)+len(s.Cc)+len(s.Bcc))
	for _, list := range [][]string{s.To, s.Cc, s.Bcc} {
		for _, raw := range list {
			addr := raw
			if strings.ContainsRune(raw, '<') { // a display name; a bare address needs no parse
				if a, err := mail.ParseAddress(raw); err == nil {
					addr = a.Address
				}
			}
			addr = core.NormalizeAddress(addr)
			if !slices.Contains(out, addr) {
				out = append(out, addr)
			}
		}
	}
	return out
}

// insertAddresses indexes the send's recipients (send_addresses): in a
// batch the rows join its multi-row insert, else one statement for all.
func (t *Tx) insertAddresses(ctx context.Context, s *core.Send) error {
	addrs := sendAddresses(s)
	if len(addrs) == 0 {
		return nil
	}
	if t.deferred != nil {
		for _, a := range addrs {
			t.deferred.addAddress(s.Tenant, a, s.ID)
		}
		return nil
	}
	rows := make([]deferredRow, len(addrs))
	for i, a := range addrs {
		rows[i] = deferredRow{args: []any{s.Tenant, a, s.ID}}
	}
	st := insertStatement(insertAddressHead, "", rows)
	if _, err := t.q.exec(ctx, st.sql, st.args...); err != nil {
		return fmt.Errorf("index the recipients of %s: %w", s.ID, err)
	}
	return nil
}

// recipientFilter is ListSends' condition for f.Recipient: the address
// index's rows of the tenant and address.
const recipientFilter = "id IN (SELECT send_id FROM send_addresses WHERE tenant = ? AND address = ?)"
