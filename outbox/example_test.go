package outbox_test

import (
	"context"
	"database/sql"
	"log"
	"os"
	"os/signal"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/outbox"
)

// The email task is created in the same transaction as the business change;
// workers send it later, exactly once, with the key made at Enqueue.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	db, err := sql.Open("sqlite", "file:app.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		log.Fatal(err)
	}
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:8787", APIKey: os.Getenv("SENDONCE_API_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Client: c})
	if err != nil {
		log.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO users (email) VALUES (?)`, "ada@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := ob.Enqueue(ctx, tx, outbox.Task{Email: client.SendRequest{
		To: []string{"ada@example.com"}, Subject: "Welcome", Text: "Hello Ada!",
	}}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // the user and the email, or neither
		log.Fatal(err)
	}

	_ = ob.Run(ctx) // until interrupted
}

// Tasks whose outcome stayed unknown wait for Reconcile, which looks the key
// up on the server before anything else.
func ExampleOutbox_Reconcile() {
	var ob *outbox.Outbox // as in the package example
	ctx := context.Background()
	stuck, err := ob.List(ctx, outbox.NeedsReconciliation, 100)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range stuck {
		rec, err := ob.Reconcile(ctx, t.ID)
		if err != nil {
			log.Printf("task %s: %v", t.ID, err)
			continue
		}
		log.Printf("task %s: %s (send %s)", rec.ID, rec.State, rec.SendID)
	}
}
