// Package ratelimit counts requests per key in fixed windows: in this
// process's memory, or in Redis when several processes must share one
// limit.
//
// A fixed window (N requests per window, the count starting over at each
// window's start) is the cheapest scheme that gives exact RateLimit-*
// headers: the limit, what is left, and when the window ends. Its known
// cost is a burst of up to 2N across a window boundary; the limit is a
// guard against runaway clients, not a metering device, so that is
// accepted.
package ratelimit
