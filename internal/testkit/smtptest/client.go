package smtptest

import (
	"testing"

	"github.com/emersion/go-smtp"
)

// Deliver hands raw to the SMTP server at addr as a relaying MTA would
// (EHLO relay.test, one recipient) and returns the final reply's text, or
// the refusal (Transact). A connection or greeting that fails ends the
// test.
func Deliver(t testing.TB, addr, from, rcpt string, raw []byte) (string, error) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatalf("dial inbound: %v", err)
	}
	defer c.Close()
	if err := c.Hello("relay.test"); err != nil {
		t.Fatal(err)
	}
	return Transact(c, from, []string{rcpt}, raw)
}

// Transact runs one mail transaction on c, as a submitting client does:
// MAIL, a RCPT per recipient, DATA. It returns the final reply's text, or
// the first refusal (after a refused RCPT it resets the transaction, so c
// can run another).
func Transact(c *smtp.Client, from string, to []string, data []byte) (string, error) {
	if err := c.Mail(from, nil); err != nil {
		return "", err
	}
	for _, r := range to {
		if err := c.Rcpt(r, nil); err != nil {
			_ = c.Reset()
			return "", err
		}
	}
	w, err := c.Data()
	if err != nil {
		return "", err
	}
	if _, err := w.Write(data); err != nil {
		return "", err
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return "", err
	}
	return resp.StatusText, nil
}
