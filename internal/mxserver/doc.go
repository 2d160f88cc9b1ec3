// Package mxserver is the SMTP listener strangers write to (--inbound-addr):
// mail for receiving addresses, stored once through app.Service.Receive
// (receive.go), and the reports that come back to --bounce-domain
// addresses, applied through app.Service.RecordBounceReport. It only maps
// SMTP to those use cases and bounds what a stranger may hold: the
// connections (internal/connlimit), the memory of messages being read
// (budget.go) and each session's time and commands.
package mxserver
