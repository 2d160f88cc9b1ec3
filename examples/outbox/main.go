// Command outbox is the README's outbox example as a program: it signs a
// user up and enqueues the welcome email in one SQLite transaction, then
// runs the outbox until sendonce has accepted the email, exactly once.
//
//	SENDONCE_API_KEY=$KEY go run ./examples/outbox ada@example.com
//
// Run it twice with the same address: the second sign-up fails on the
// users table's primary key, and no second email is enqueued.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/signal"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/outbox"
)

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "outbox example:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: outbox EMAIL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	db, err := sql.Open("sqlite", "file:outbox-example.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS users (email TEXT PRIMARY KEY)`); err != nil {
		return err
	}
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		return err
	}
	url := getenv("SENDONCE_API_URL")
	if url == "" {
		url = "http://127.0.0.1:8787"
	}
	c, err := client.New(client.Config{BaseURL: url, APIKey: getenv("SENDONCE_API_KEY")})
	if err != nil {
		return err
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Client: c, PollInterval: 100 * time.Millisecond})
	if err != nil {
		return err
	}

	// The business change and the email task: one transaction.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, `INSERT INTO users (email) VALUES (?)`, args[0]); err != nil {
		return fmt.Errorf("sign up: %w", err)
	}
	task, err := ob.Enqueue(ctx, tx, outbox.Task{Email: client.SendRequest{
		To: []string{args[0]}, Subject: "Welcome", Text: "Hello, and welcome!",
	}})
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	fmt.Printf("task %s enqueued with key %s\n", task.ID, task.IdempotencyKey)

	// Workers send it; stop once it is settled.
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(runCtx) }()
	defer func() { stopRun(); <-done }()
	for {
		rec, err := ob.Get(ctx, task.ID)
		if err != nil {
			return err
		}
		switch rec.State {
		case outbox.Sent:
			fmt.Printf("sent: %s (%s)\n", rec.SendID, rec.SendStatus)
			return nil
		case outbox.Rejected, outbox.NeedsReconciliation:
			return fmt.Errorf("task %s: %s: %s", rec.ID, rec.State, rec.LastError)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("task %s still %s: %w", rec.ID, rec.State, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
