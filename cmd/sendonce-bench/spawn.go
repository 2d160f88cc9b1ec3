package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
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

// spawn starts n API processes and one worker on db with the transport
// ("" for the capture inbox), and makes an API key. One API process on
// SQLite is instead one process in both roles — sendonce's embedded
// default: two processes on one SQLite file take turns at its write lock.
func spawn(ctx context.Context, bin, db, transport string, n int) (*cluster, error) {
	if db == "" {
		return nil, fmt.Errorf("--spawn-api needs --db")
	}
	cl := &cluster{}
	start := func(role string) (string, error) {
		// --rate-limit 0: the load tool measures the server with one key,
		// not the per-key limit that would refuse most of its requests.
		args := []string{"serve", "--db", db, "--role", role, "--addr", "127.0.0.1:0", "--log-level", "info", "--rate-limit", "0"}
		if transport != "" {
			args = append(args, "--transport", transport)
		}
		cmd := exec.CommandContext(ctx, bin, args...)
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
	single := n == 1 && strings.HasPrefix(db, "sqlite:")
	first := "worker"
	if single {
		first = "all"
	}
	// The worker first: it migrates an empty database.
	addr, err := start(first)
	if err != nil {
		cl.stop()
		return nil, err
	}
	out, err := exec.CommandContext(ctx, bin, "keys", "create", "--db", db, "--name", "bench", "--scopes", "send,read").Output()
	if err != nil {
		cl.stop()
		return nil, fmt.Errorf("keys create: %w", err)
	}
	cl.key = strings.TrimSpace(string(out))
	if single {
		cl.urls = []string{"http://" + addr}
		return cl, nil
	}
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

// peakRSSKiB is the largest peak resident set size (VmHWM) of the running
// processes, in KiB; 0 when /proc does not tell.
func (c *cluster) peakRSSKiB() int64 {
	var peak int64
	for _, p := range c.procs {
		if kib := vmHWM(p.Process.Pid); kib > peak {
			peak = kib
		}
	}
	return peak
}

// vmHWM reads the VmHWM line of /proc/PID/status (Linux); 0 elsewhere.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v) // "123456 kB"
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

func (c *cluster) stop() {
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procs {
		_ = p.Wait()
	}
}
