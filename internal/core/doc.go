// Package core holds sendonce's domain: sends and their statuses, API keys
// and scopes, templates, mailboxes, the coded application error, and the
// storage interfaces the adapters implement. It knows nothing of HTTP or SQL.
package core
