// Package demoagent holds small scripted agents compiled into the server.
// They need no model, no API key and no network: they run in a PTY like any
// CLI agent (launch spec kind "builtin": the server runs its own executable
// as `office-server agent --script NAME`), print a prompt ("> ") when ready
// for input, read lines from their terminal, and speak the office protocol,
// so a newcomer sees an office work in the console within a minute.
//
// Scripts:
//
//	po    asks the user which feature to build ([ASK_USER] with options),
//	      waits for the answer, gives the developer the task ([INVOKE:dev]),
//	      waits for the result, completes the phase, and starts over.
//	dev   waits for a task, prints its steps, and delivers a result
//	      ([DELIVER_RESULT:po]).
//	echo  repeats every line it reads (for console tests).
package demoagent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Scripts lists the script names Run accepts.
var Scripts = []string{"po", "dev", "echo"}

// Options tune a script.
type Options struct {
	// Peer is the agent a script talks to: po invokes it (default "dev"),
	// dev delivers to it (default "po").
	Peer string
	// Step is the pause between a script's visible steps (default 700ms).
	Step time.Duration
	// Quiet is how long input must be quiet before a multi-line message
	// counts as complete (default 400ms).
	Quiet time.Duration
}

// Run runs script until ctx ends or in reaches EOF. It returns an error
// for an unknown script.
func Run(ctx context.Context, script string, in io.Reader, out io.Writer, opt Options) error {
	if opt.Step <= 0 {
		opt.Step = 700 * time.Millisecond
	}
	if opt.Quiet <= 0 {
		opt.Quiet = 400 * time.Millisecond
	}
	a := &agent{ctx: ctx, out: out, lines: readLines(in), opt: opt}
	switch script {
	case "po":
		if a.opt.Peer == "" {
			a.opt.Peer = "dev"
		}
		return a.po()
	case "dev":
		if a.opt.Peer == "" {
			a.opt.Peer = "po"
		}
		return a.dev()
	case "echo":
		return a.echo()
	}
	return fmt.Errorf("unknown script %q (want one of %s)", script, strings.Join(Scripts, ", "))
}

type agent struct {
	ctx   context.Context
	out   io.Writer
	lines <-chan string
	opt   Options
}

// readLines feeds lines of in, cleaned of terminal controls (a bracketed
// paste's markers, stray escapes), to a channel closed at EOF. The
// goroutine ends with in (the PTY closes when the session stops).
func readLines(in io.Reader) <-chan string {
	c := make(chan string, 64)
	go func() {
		defer close(c)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c <- clean(sc.Text())
		}
	}()
	return c
}

var controls = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b.|[\x00-\x08\x0b-\x1f\x7f]`)

func clean(s string) string { return strings.TrimSpace(controls.ReplaceAllString(s, "")) }

func (a *agent) say(format string, args ...any) {
	fmt.Fprintf(a.out, format+"\n", args...)
}

// prompt shows that the agent waits for input.
func (a *agent) prompt() { fmt.Fprint(a.out, "> ") }

func (a *agent) pause(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.ctx.Done():
		return a.ctx.Err()
	case <-t.C:
		return nil
	}
}

// read waits for a message: the first non-empty line, plus any lines that
// follow within the quiet period (a pasted multi-line prompt).
func (a *agent) read() ([]string, error) {
	var got []string
	for len(got) == 0 {
		select {
		case <-a.ctx.Done():
			return nil, a.ctx.Err()
		case l, ok := <-a.lines:
			if !ok {
				return nil, io.EOF
			}
			if l != "" {
				got = append(got, l)
			}
		}
	}
	for {
		t := time.NewTimer(a.opt.Quiet)
		select {
		case <-a.ctx.Done():
			t.Stop()
			return nil, a.ctx.Err()
		case l, ok := <-a.lines:
			t.Stop()
			if !ok {
				return got, nil
			}
			if l != "" {
				got = append(got, l)
			}
		case <-t.C:
			return got, nil
		}
	}
}

// gist picks the meaningful part of what the office typed in: the first
// quoted line ("> ..." is how the office quotes someone else's words: the
// answer, the task, the result), else the last line; shortened.
func gist(lines []string) string {
	s := ""
	for _, l := range lines {
		if q, ok := strings.CutPrefix(l, "> "); ok && strings.TrimSpace(q) != "" {
			s = strings.TrimSpace(q)
			break
		}
	}
	if s == "" {
		for _, l := range slices.Backward(lines) {
			if l = strings.TrimSpace(l); l != "" {
				s = l
				break
			}
		}
	}
	if r := []rune(s); len(r) > 80 {
		s = string(r[:80]) + "…"
	}
	return s
}

// taskFrom finds who gave a task ("[OFFICE] Task <id> from <agent>:").
var taskFrom = regexp.MustCompile(`Task \S+ from (\S+?):`)

func sender(lines []string) string {
	for _, l := range lines {
		if m := taskFrom.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	return ""
}

var features = [][]string{
	{"Login page", "Search", "Dark mode"},
	{"Export to CSV", "Notifications", "Team settings"},
}

func (a *agent) po() error {
	a.say("po: product owner (built-in demo agent: no model, no network)")
	for round := 1; ; round++ {
		if err := a.pause(a.opt.Step); err != nil {
			return err
		}
		a.say("po: planning round %d", round)
		opts := features[(round-1)%len(features)]
		a.say("[ASK_USER]")
		a.say("question: Which feature should the team build first?")
		a.say("type: selection")
		a.say("options: [%s]", strings.Join(opts, ", "))
		a.say("context: Round %d of the demo office. Answer in the console.", round)
		a.say("[/ASK_USER]")
		a.prompt()
		answer, err := a.read()
		if err != nil {
			return err
		}
		choice := gist(answer)
		a.say("po: the user chose %q", choice)
		if err := a.pause(a.opt.Step); err != nil {
			return err
		}
		a.say("[INVOKE:%s]", a.opt.Peer)
		a.say("Build the feature the user chose: %s", choice)
		a.say("context: demo office, round %d", round)
		a.say("[/INVOKE]")
		a.prompt()
		result, err := a.read()
		if err != nil {
			return err
		}
		a.say("po: result received from %s: %s", a.opt.Peer, gist(result))
		a.say("=== PHASE %d COMPLETE ===", round)
		if err := a.pause(4 * a.opt.Step); err != nil {
			return err
		}
	}
}

func (a *agent) dev() error {
	a.say("dev: developer (built-in demo agent: no model, no network)")
	for {
		a.prompt()
		task, err := a.read()
		if err != nil {
			return err
		}
		what := gist(task)
		a.say("dev: got a task: %s", what)
		steps := []string{"reading the task", "writing the code", "running the tests"}
		for i, s := range steps {
			if err := a.pause(a.opt.Step); err != nil {
				return err
			}
			a.say("Step %d/%d: %s", i+1, len(steps), s)
		}
		to := sender(task)
		if to == "" {
			to = a.opt.Peer
		}
		a.say("[DELIVER_RESULT:%s]", to)
		a.say("type: markdown")
		a.say("content: Done: %s. 3 files changed, 12 tests pass.", what)
		a.say("[/DELIVER_RESULT]")
	}
}

func (a *agent) echo() error {
	a.say("echo: ready")
	for {
		a.prompt()
		select {
		case <-a.ctx.Done():
			return a.ctx.Err()
		case l, ok := <-a.lines:
			if !ok {
				return nil
			}
			a.say("echo: %s", l)
		}
	}
}
