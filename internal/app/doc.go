// Package app is sendonce's use cases: authenticate a key, turn a send
// request into a send, accept it (with its delivery job) in a transaction,
// approve, reject and reconcile sends, manage templates, mailboxes and keys.
// Adapters (HTTP, CLI) call it; it calls core.Store.
package app
