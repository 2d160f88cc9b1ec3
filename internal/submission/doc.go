// Package submission is sendonce's SMTP submission server (docs/smtp.md):
// apps that speak SMTP get the acceptance of POST /v1/send. A message is
// accepted in one transaction with its idempotency record, and the 250 to
// DATA is written only after that transaction committed, naming the send.
// A client that resends the same message with the same key (its
// Idempotency-Key, Resend-Idempotency-Key or Message-ID header) is answered
// with the first send's id and nothing is sent again — RFC 1047's
// duplicate, which a connection lost after the final dot causes, does not
// happen. docs/smtp.md has the rules.
package submission
