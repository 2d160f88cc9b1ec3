// Package transport hands a finished message to the next hop and says
// precisely what a failed attempt means for the send.
//
// sendonce promises never to send a message twice, so the outcome of every
// attempt is classified exactly once, here, at the network boundary:
//
//   - Temporary: nothing can have been delivered (the failure came before the
//     server answered DATA with 354, or the server said 4xx). Retry later.
//   - Permanent: the server said 5xx, or the envelope can never be sent. Do
//     not retry.
//   - Ambiguous: the connection broke or timed out after the server accepted
//     DATA and before it answered the end of the message. The relay may or
//     may not have taken the message, so it must never be retried
//     automatically.
//
// The SMTP transport wraps github.com/emersion/go-smtp's client, which has no
// notion of context.Context: deadlines are set on the connection for every
// command and the connection is closed when the context is done.
package transport
