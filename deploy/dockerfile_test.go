package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// A small reader of the Dockerfile's syntax, enough for the checks here:
// instructions with their continuation lines joined, comments dropped,
// grouped into stages. (moby/buildkit's parser would bring the whole of
// BuildKit's module graph for what is forty lines.)

type instruction struct {
	cmd   string            // upper case: FROM, RUN, COPY…
	flags map[string]string // --from=build, --chown=…
	args  string            // the rest, raw
}

// words splits the arguments: a JSON array (exec form) or shell words.
func (in instruction) words() []string {
	if strings.HasPrefix(in.args, "[") {
		var w []string
		if json.Unmarshal([]byte(in.args), &w) == nil {
			return w
		}
	}
	return shellWords(in.args)
}

type stage struct {
	base, name string
	instrs     []instruction
}

type dockerfile struct{ stages []stage }

func parseDockerfile(path string) (*dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if body, ok := strings.CutSuffix(l, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("%s ends in a continuation", path)
	}
	df := &dockerfile{}
	for _, l := range lines {
		cmd, rest, _ := strings.Cut(l, " ")
		in := instruction{cmd: strings.ToUpper(cmd), flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			var flag string
			flag, rest, _ = strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
			in.flags[k] = v
			rest = strings.TrimSpace(rest)
		}
		in.args = rest
		if in.cmd == "FROM" {
			w := shellWords(rest)
			st := stage{base: w[0]}
			if len(w) == 3 && strings.EqualFold(w[1], "AS") {
				st.name = w[2]
			}
			df.stages = append(df.stages, st)
			continue
		}
		if len(df.stages) == 0 {
			if in.cmd == "ARG" {
				continue
			}
			return nil, fmt.Errorf("%s: %s before FROM", path, in.cmd)
		}
		last := &df.stages[len(df.stages)-1]
		last.instrs = append(last.instrs, in)
	}
	return df, nil
}

func (df *dockerfile) final() stage { return df.stages[len(df.stages)-1] }

// goBuild finds the RUN that builds sendonce and returns its words.
func (df *dockerfile) goBuild() (*instruction, []string) {
	for _, st := range df.stages {
		for i, in := range st.instrs {
			w := in.words()
			for j := 0; j+1 < len(w); j++ {
				if in.cmd == "RUN" && w[j] == "go" && w[j+1] == "build" {
					return &st.instrs[i], w
				}
			}
		}
	}
	return nil, nil
}

// all returns the stage's instructions of one kind.
func (st stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range st.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// env is the stage's ENV, in order.
func (st stage) env() map[string]string {
	env := map[string]string{}
	for _, in := range st.all("ENV") {
		for _, w := range in.words() {
			if k, v, ok := strings.Cut(w, "="); ok {
				env[k] = v
			}
		}
	}
	return env
}

// shellWords splits like sh for what the Dockerfile uses: blanks separate,
// single and double quotes group.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
