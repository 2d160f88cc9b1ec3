package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

type cluster struct {
	urls  []string
	key   string
	procs []*exec.Cmd
}

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// spawn starts n API processes and one worker on db, and makes an API key.
func spawn(ctx context.Context, bin, db string, n int) (*cluster, error) {
	if db == "" {
		return nil, fmt.Errorf("--spawn-api needs --db")
	}
	cl := &cluster{}
	start := func(role string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, "serve", "--db", db, "--role", role, "--addr", "127.0.0.1:0", "--log-level", "info")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return "", err
		}
		if err := cmd.Start(); err != nil {
			return "", fmt.Errorf("start %s: %w", bin, err)
		}
		cl.procs = append(cl.procs, cmd)
		addr := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				line := sc.Text()
				if m := listening.FindStringSubmatch(line); m != nil {
					select {
					case addr <- m[1]:
					default:
					}
				}
				if strings.Contains(line, "worker started") {
					select {
					case addr <- "":
					default:
					}
				}
			}
		}()
		select {
		case a := <-addr:
			return a, nil
		case <-time.After(30 * time.Second):
			return "", fmt.Errorf("%s %s did not start", bin, role)
		}
	}
	// The worker first: it migrates an empty database.
	if _, err := start("worker"); err != nil {
		cl.stop()
		return nil, err
	}
	out, err := exec.CommandContext(ctx, bin, "keys", "create", "--db", db, "--name", "bench", "--scopes", "send,read").Output()
	if err != nil {
		cl.stop()
		return nil, fmt.Errorf("keys create: %w", err)
	}
	cl.key = strings.TrimSpace(string(out))
	for range n {
		a, err := start("api")
		if err != nil {
			cl.stop()
			return nil, err
		}
		cl.urls = append(cl.urls, "http://"+a)
	}
	return cl, nil
}

func (c *cluster) stop() {
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procs {
		_ = p.Wait()
	}
}
