package delivery

import (
	"slices"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/verp"
)

// bounceAddresses are the envelope senders of an attempt of s to rcpts:
// a transaction that carries one recipient gets a bounce address bound to
// that recipient, so a report to it speaks for that recipient only (a
// recipient reads the address in its copy's Return-Path, and with a
// send-level one could report a co-recipient bounced). from is for a
// transaction of several recipients, or all of rcpts at once; forOne for
// a transport that splits rcpts into transactions (mx, by destination).
// A single-recipient send is therefore still one transaction.
func bounceAddresses(b *verp.Signer, s *core.Send, rcpts []string) (from string, forOne func(string) string) {
	all := app.RecipientsOf(s)
	forOne = func(rcpt string) string {
		if i := slices.Index(all, core.NormalizeAddress(rcpt)); i >= 0 {
			return b.RecipientAddress(s.ID, i)
		}
		return b.Address(s.ID)
	}
	if len(rcpts) == 1 {
		return forOne(rcpts[0]), forOne
	}
	return b.Address(s.ID), forOne
}
