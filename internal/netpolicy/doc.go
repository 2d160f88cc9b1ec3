// Package netpolicy is the one policy for connections sendonce makes on a
// caller's behalf: mail exchangers of the mx transport, the SMTP relays a
// tenant admin sets on a mailbox through the API, and (as they arrive)
// webhook endpoints, attachment URLs and DNS-check targets.
//
// A Policy allows global unicast addresses only, unless the operator lists
// exceptions (--outbound-allow). It unmaps IPv4-mapped IPv6 addresses
// before judging them (::ffff:127.0.0.1 is loopback, ::ffff:0.0.0.0 is
// unspecified), and it judges every address at connect time through
// net.Dialer.Control, so a name that resolved to a public address when it
// was validated and to 127.0.0.1 when it is dialled (DNS rebinding) is
// still refused.
//
// What the operator configures on the command line (--transport
// smtp://127.0.0.1:2525) is trusted and does not go through a Policy; what
// a tenant sets through the API does.
//
// Describe reduces a connection failure to its class (refused, timeout,
// blocked, …) for callers who must not learn more about the remote side
// than that: a route that echoed remote banners or error texts would be a
// port scanner.
package netpolicy
