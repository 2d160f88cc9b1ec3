// Package smtptest runs a recording SMTP server, built on
// github.com/emersion/go-smtp, for tests of the transport and of anything
// that sends mail through it.
//
// The server listens on 127.0.0.1 only, records every message it accepts,
// can be told to fail or hang up at chosen points of the conversation
// (SetBehaviour), and is closed by t.Cleanup, which also reports client
// connections left open.
package smtptest
