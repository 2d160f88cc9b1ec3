// Command sendonce is the email API that never sends twice. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sendonce/sendonce/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, cli.ErrUsage):
		fmt.Fprintln(os.Stderr, "sendonce:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sendonce:", err)
		os.Exit(1)
	}
}
