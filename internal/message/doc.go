// Package message renders one send into a complete RFC 5322 message: the
// exact bytes handed to the SMTP relay and kept whole in the dev inbox.
//
// Rendering happens at delivery time from stored fields, not once at
// acceptance, so every retry of a send re-renders it. Build is therefore a
// pure function of its input: the Date and Message-ID come from the caller and
// the MIME boundary is derived from the Message-ID, so every attempt of one
// send yields byte-identical output (and a DKIM signature over it stays
// stable).
//
// Build is also the last line of defence against header injection. Callers are
// expected to validate at the API edge with CheckHeader and HasLineBreak, but
// Build re-checks every field it writes into the header section and refuses to
// render (returning *HeaderError) rather than emit a message whose header
// block could be split by caller-controlled text.
//
// Output conventions:
//   - every line ends in CRLF and no line exceeds 998 octets; header lines are
//     folded at whitespace to stay near 78 octets where the text allows it;
//   - non-ASCII header text (subject, display names, extra header values) is
//     sent as RFC 2047 encoded-words in UTF-8, so the message stays 7-bit
//     clean; only an internationalised address itself is written raw, as it
//     needs SMTPUTF8 on the envelope anyway;
//   - bodies are UTF-8 and quoted-printable, which keeps long lines and
//     non-ASCII safe and lets the boundary contain "=", a character
//     quoted-printable never emits bare, so body text can never forge a MIME
//     boundary even though the boundary is predictable.
package message
