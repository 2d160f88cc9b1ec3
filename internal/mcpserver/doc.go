// Package mcpserver is sendonce's Model Context Protocol server: the tools
// an AI agent sends mail with (send_email, preview_email, get_send_status,
// list_templates, list_recent_sends). It talks to a sendonce server over
// HTTP through the client package, with its own API key, so it needs no
// database and runs anywhere.
//
// Safety rests on the server, not on this process or on prompt text: the
// Idempotency-Key of send_email is derived from the send's intent (package
// agent), so an agent cannot make a second send by calling again; the key's
// guardrails (approval, recipient allowlist, caps, no bcc/from/headers) and
// the audit log are enforced and written by the sendonce server.
//
// What the tools return that came from a message or a recipient (subjects,
// bodies, addresses, template texts, error messages naming an address) is
// returned as data in the structured result only. Tool names, descriptions
// and schemas are constant strings: nothing a mail or a recipient contains
// ever becomes part of a tool's description or of an instruction to the
// model. The "note" fields of results are fixed sentences chosen by code.
package mcpserver
