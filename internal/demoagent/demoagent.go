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
//	      waits for the result, completes the phase, and starts over. While
//	      it waits for one thing, anything else (a result, a notice, another
//	      agent's words) is acknowledged and not taken for it. A restarted
//	      po starts over at round 1; its question, the same words, makes
//	      the office cancel the one the old process left pending.
//	dev   waits for a task ("[OFFICE] Task <id> from <agent>"), prints its
//	      steps, and delivers the result to the agent that gave the task
//	      ([DELIVER_RESULT:<agent>]). Anything else it is told gets a
//	      sentence back and no result: a result answers a task.
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
	// Peer is the agent po gives its task to (default "dev"); dev
	// delivers each result to the agent that gave the task.
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
	a := &agent{name: script, ctx: ctx, out: out, lines: readLines(in), opt: opt}
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
	name  string
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

// What the office types into an agent's terminal starts with "[OFFICE]";
// these say what a message is.
const (
	msgAnswer  = "answer"  // [OFFICE] Answer to question <id> (...):
	msgResult  = "result"  // [OFFICE] Result from <agent> ...
	msgTask    = "task"    // [OFFICE] Task <id> from <agent>:
	msgMessage = "message" // [OFFICE] Message from a person in the office:
	msgNotice  = "notice"  // any other [OFFICE] line
	msgTyped   = "typed"   // a line typed at the terminal by a person
)

// kindOf says what a message read from the terminal is.
func kindOf(lines []string) string {
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "[OFFICE] ")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "Answer to question "):
			return msgAnswer
		case strings.HasPrefix(rest, "Result from "):
			return msgResult
		case taskFrom.MatchString(rest) && strings.HasPrefix(rest, "Task "):
			return msgTask
		case strings.HasPrefix(rest, "Message from a person"):
			return msgMessage
		}
		return msgNotice
	}
	return msgTyped
}

// splitMessages cuts what was read at once into messages: each "[OFFICE]"
// line starts one (the office may type two back to back).
func splitMessages(lines []string) [][]string {
	var out [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, "[OFFICE]") || len(out) == 0 {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], l)
	}
	return out
}

// await reads until a message of one of the kinds comes and returns it;
// other messages are acknowledged in a sentence and not acted on.
func (a *agent) await(what string, kinds ...string) ([]string, error) {
	for {
		a.prompt()
		lines, err := a.read()
		if err != nil {
			return nil, err
		}
		msgs := splitMessages(lines)
		for i, m := range msgs {
			k := kindOf(m)
			if slices.Contains(kinds, k) {
				for _, rest := range msgs[i+1:] {
					a.say("%s: noted (%s): %s", a.name, kindOf(rest), gist(rest))
				}
				return m, nil
			}
			a.say("%s: noted (%s, not what I wait for: %s): %s", a.name, k, what, gist(m))
		}
	}
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
		// The person's answer, or a line typed at this terminal.
		answer, err := a.await("the answer to my question", msgAnswer, msgTyped)
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
		result, err := a.await("the result from "+a.opt.Peer, msgResult)
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
		lines, err := a.read()
		if err != nil {
			return err
		}
		for _, m := range splitMessages(lines) {
			if kindOf(m) != msgTask {
				// A result answers a task: words that are not one get a
				// sentence back, never an unrequested result.
				a.say("dev: I work on tasks other agents give me (po gives one once its question is answered); noted: %s", gist(m))
				continue
			}
			if err := a.work(m); err != nil {
				return err
			}
		}
	}
}

// work does one task and delivers its result to the agent that gave it.
func (a *agent) work(task []string) error {
	what := gist(task)
	a.say("dev: got a task from %s: %s", sender(task), what)
	steps := []string{"reading the task", "writing the code", "running the tests"}
	for i, s := range steps {
		if err := a.pause(a.opt.Step); err != nil {
			return err
		}
		a.say("Step %d/%d: %s", i+1, len(steps), s)
	}
	a.say("[DELIVER_RESULT:%s]", sender(task))
	a.say("type: markdown")
	a.say("content: Done: %s. 3 files changed, 12 tests pass.", what)
	a.say("[/DELIVER_RESULT]")
	return nil
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
