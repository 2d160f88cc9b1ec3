// Package cli is the sendonce command line: the subcommands of the
// table in commands.go.
// main calls Run and nothing else, so tests run the whole program in
// process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/sendonce/sendonce/internal/buildinfo"
)

// Version is set at build time with -ldflags "-X …/internal/cli.Version=…".
var Version = ""

// ErrUsage marks errors that are the caller's wording; main exits 2.
var ErrUsage = errors.New("usage")

// Run runs the command in args (without the program name).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText())
		return fmt.Errorf("%w: no command given", ErrUsage)
	}
	if c, ok := lookupCommand(args[0]); ok {
		return c.run(ctx, args[1:], getenv, stdout, stderr)
	}
	fmt.Fprint(stderr, usageText())
	return fmt.Errorf("%w: unknown command %q", ErrUsage, args[0])
}

func version() string { return buildinfo.Read(Version).Version }

func newFlags(name string, getenv func(string) string, stderr io.Writer) *envFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &envFlags{fs: fs, getenv: getenv}
}

// subcommandFlags opens a command that takes a subcommand word first
// ("domains add …"): ErrUsage with usage when the word is missing, else a
// flag set named after the command and the word, so -h and parse errors
// name both.
func subcommandFlags(command string, args []string, usage string, getenv func(string) string, stderr io.Writer) (*envFlags, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUsage, usage)
	}
	return newFlags(command+" "+args[0], getenv, stderr), nil
}

func parse(e *envFlags, args []string) error {
	if err := e.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return e.err()
}

// parseInterleaved parses flags that may come before or after positional
// arguments ("status ID --json", "domains add example.com --selector s1")
// and returns the positional ones. Each round consumes at least one
// argument, so it ends.
func parseInterleaved(e *envFlags, args []string) ([]string, error) {
	var pos []string
	for rounds := len(args) + 1; rounds > 0; rounds-- {
		if err := parse(e, args); err != nil {
			return nil, err
		}
		args = e.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return pos, nil
}

// positional parses a command's words (its flags may stand anywhere among
// them) and returns the positional ones: ErrUsage with usage unless there
// are exactly n.
func positional(e *envFlags, args []string, n int, usage string) ([]string, error) {
	pos, err := parseInterleaved(e, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != n {
		return nil, fmt.Errorf("%w: %s", ErrUsage, usage)
	}
	return pos, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
