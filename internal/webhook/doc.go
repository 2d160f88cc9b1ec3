// Package webhook delivers a tenant's send events to its HTTP endpoints
// (docs/webhooks.md): the use cases behind /v1/webhooks and
// Resend's /webhooks (Service), the payloads (Build), the endpoint rules
// (CheckEndpoint), the signing secret at rest (SealSecret) and the worker
// that sends, retries and disables (Worker).
//
// Deliveries are rows the store queues in the transaction of the event
// they carry (core.Tx.AddEvent), so a change is never without its
// delivery; each row is its own job, claimed with a lease like a send row,
// so deliveries survive restarts and are made at least once, with the same
// webhook-id on every attempt. Signatures are Standard Webhooks
// (package webhooksig).
package webhook
