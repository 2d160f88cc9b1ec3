// Package mcpserver is sendonce's Model Context Protocol server: the tools
// an AI agent sends mail with (send_email, preview_email, get_send_status,
// list_templates, list_recent_sends) and reads and answers received mail
// with (list_messages, read_message, reply_to_message, forward_message). It talks to a sendonce server over
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
//
// Received mail is written by outsiders, who may write instructions to the
// model (prompt injection by email). list_messages and read_message return
// it in one fixed structure, flagged untrusted_content with a constant
// note: HTML reduced to visible text, links listed and never fetched,
// attachments listed by name, type and size, invisible characters dropped,
// the text bounded (mailview.go, htmltext.go). reply_to_message and
// forward_message derive their key from the message and what is said to
// whom (agent.ReplyKey) and go through send_email's path (submit); the
// server holds a reply outside the thread, and any forward its allowlist
// does not cover, for a person (docs/agents.md, "Reading mail").
package mcpserver
