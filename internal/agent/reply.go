package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"net/mail"
	"slices"
	"strings"
)

// Replies and forwards, version 1.
//
// The reply_to_message and forward_message tools answer a received
// message; their intent is the message and what is said to whom. Their key
// is "mcp-v1:" followed by the hex SHA-256 of the RFC 8785 canonical JSON
// of
//
//	{"action": "reply" | "forward", "message_id": ID, "reply_all": B,
//	 "to": [A…], "cc": [A…], "text": T, "html": H, "v": 1}
//
// where ID is the received message's id as given, B the reply-all flag
// (false for a forward), A… the bare added addresses lower-cased, sorted,
// without duplicates, T the text (a forward's note) and H the HTML, each
// with line ends made LF and surrounding white space trimmed. The object
// has an "action" member and no "intent" one, so no reply key is ever a
// send key. Five identical calls are one send; a reply with other words is
// another reply (the server does not judge whether it says the same).

// Reply is what a reply or forward tool call asks for.
type Reply struct {
	Action    string // "reply" or "forward"
	MessageID string
	ReplyAll  bool
	To, Cc    []string
	Text      string // a forward's note
	HTML      string
}

// canonicalReply is the object the key is the hash of.
type canonicalReply struct {
	Action    string   `json:"action"`
	MessageID string   `json:"message_id"`
	ReplyAll  bool     `json:"reply_all"`
	To        []string `json:"to"`
	Cc        []string `json:"cc"`
	Text      string   `json:"text"`
	HTML      string   `json:"html"`
	V         int      `json:"v"`
}

// ReplyKey derives the Idempotency-Key of a reply or forward (see above).
func ReplyKey(r Reply) (string, error) {
	if r.Action != "reply" && r.Action != "forward" {
		return "", invalid("action must be reply or forward")
	}
	id, err := cleanText("message_id", r.MessageID, 200)
	if err != nil {
		return "", err
	}
	to, err := bareSorted(r.To)
	if err != nil {
		return "", err
	}
	cc, err := bareSorted(r.Cc)
	if err != nil {
		return "", err
	}
	c, err := canonical(canonicalReply{Action: r.Action, MessageID: id, ReplyAll: r.ReplyAll, To: to, Cc: cc,
		Text: normalizeBody(r.Text), HTML: normalizeBody(r.HTML), V: 1})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(c))
	return KeyPrefix + hex.EncodeToString(sum[:]), nil
}

// ReplyIntentJSON is the canonical JSON the mail tools send as the intent
// header, for the audit log: the action ("list", "read", "reply",
// "forward") and the message concerned, if one is.
func ReplyIntentJSON(action, messageID string) (string, error) {
	return canonical(struct {
		Action    string `json:"action"`
		MessageID string `json:"message_id,omitempty"`
	}{action, strings.TrimSpace(messageID)})
}

func normalizeBody(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.TrimSpace(strings.ReplaceAll(s, "\r", "\n"))
}

// bareSorted is like Recipients but allows none.
func bareSorted(l []string) ([]string, error) {
	out := []string{}
	for _, raw := range l {
		a, err := mail.ParseAddress(raw)
		if err != nil {
			return nil, invalid("recipient %q is not an address", raw)
		}
		out = append(out, strings.ToLower(a.Address))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
