package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/sendonce/sendonce/client"
)

// Send with a key made once per logical email and stored before the call;
// every retry of this call, and every later call for the same email, uses it.
func ExampleClient_Send() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:8787", APIKey: os.Getenv("SENDONCE_API_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	key := "welcome-user-42" // or client.NewIdempotencyKey(), stored with the task
	s, err := c.Send(ctx, &client.SendRequest{
		To:      []string{"Ada <ada@example.com>"},
		Subject: "Welcome",
		Text:    "Hello Ada!",
	}, &client.SendOptions{IdempotencyKey: key})
	var apiErr *client.Error
	switch {
	case err == nil:
		fmt.Println(s.ID, s.Status, "replayed:", s.Replayed)
	case errors.As(err, &apiErr) && client.IsRejected(err):
		// The server's final answer (e.g. 422 validation_error, param "to").
		fmt.Println("refused:", apiErr.Status, apiErr.Code, apiErr.Param)
	case client.IsOutcomeUnknown(err):
		// Maybe sent, maybe not: look the key up; never send under a new key.
		found, ok, lerr := c.SendByKey(ctx, key)
		fmt.Println("looked up:", found, ok, lerr)
	}
}

// Look a send up by the key it was made with. This works for as long as the
// server keeps the send, long after the key stopped replaying.
func ExampleClient_SendByKey() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:8787", APIKey: os.Getenv("SENDONCE_API_KEY"), Timeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	s, found, err := c.SendByKey(context.Background(), "welcome-user-42")
	switch {
	case err != nil:
		log.Fatal(err)
	case !found:
		fmt.Println("never accepted: sending with the same key is safe")
	default:
		fmt.Println(s.ID, s.Status)
	}
}

// Settle a send whose handoff to the relay was interrupted (status unknown).
func ExampleClient_Reconcile() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:8787", APIKey: os.Getenv("SENDONCE_ADMIN_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.Reconcile(context.Background(), "snd_…", client.OutcomeSent, nil)
	if client.ErrorCode(err) == client.CodeInvalidState {
		fmt.Println("the send is not unknown")
		return
	}
	fmt.Println(s.Status, err)
}

// A webhook receiver checks each delivery before it trusts it, and
// de-duplicates on webhook-id (deliveries come at least once).
func ExampleVerifyWebhook() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the webhook's signing_secret
	http.HandleFunc("/hooks/sendonce", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || client.VerifyWebhook(secret, r.Header, body, 5*time.Minute) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// Seen r.Header.Get("webhook-id") before? Answer 200 and stop.
		// Otherwise handle body ({"type": "email.sent", "data": {…}}).
		w.WriteHeader(http.StatusNoContent)
	})
}
