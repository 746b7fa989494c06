package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The load agent (`office-load agent --name N --report SOCK`) is the cheap
// agent the server runs for each office member (launch kind command). It
// asks a question ([ASK_USER]) and waits for the answer, and again after
// each answer. It reads its terminal raw, with bracketed paste on, so it
// sees when the office's text has arrived whole and when Enter followed,
// and sends both times to the driver (a datagram on SOCK):
//
//	<name> <text arrived, unix ns> <Enter, unix ns> <early: 1 if Enter came with the text> <what: answer, task, result, other>
//
// With --input echo (the default) it echoes what it is typed, as a CLI's
// prompt does. With --input raw it shows nothing of it (a line-oriented
// CLI answered from another process); with --input canon it reads its
// terminal in canonical mode with echo off (a program reading lines), so
// the terminal holds each line until its Enter (never early).
//
// An answer "invoke <agent>" makes it give that agent a task instead of
// asking again: it prints an [INVOKE:<agent>] block and reports when
// (`printed <name> <agent> <unix ns>`). Given a task, it delivers a result
// to the caller ([DELIVER_RESULT]); given the result, it asks again.
//
// The proxy protocol (seed 004): an answer "proxy <agent>" makes it print
// a [PROXY_REQUEST] create_plan for that agent as its proxy, with no
// fallback (`proxy <name> <agent> <unix ns>`); a [PROXY_RESPONSE] makes it
// ask again. Given a proxy request (what: proxyreq:<requester>) it keeps
// the task's id; an answer "close task" makes it print an update_status
// closing the oldest task it keeps (`closed <name> <task> <unix ns>`).
// Told of an update (what: told) or given a proxy request, it only shows
// its prompt again.
func agentMain(args []string, stdin io.Reader, stdout io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	name := fs.String("name", "", "the agent's name")
	report := fs.String("report", "", "unix datagram socket of the driver")
	input := fs.String("input", "echo", "echo, raw (shows nothing it is typed) or canon (canonical mode, echo off)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	switch *input {
	case "echo", "raw":
		err = makeRaw(0)
	case "canon":
		err = makeCanonical(0)
	default:
		fmt.Fprintln(os.Stderr, "agent: bad --input", *input)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent: terminal mode:", err)
	}
	var rep net.Conn
	if *report != "" {
		c, err := net.Dial("unixgram", *report)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent: report socket:", err)
			return 1
		}
		rep = c
		defer c.Close()
	}
	a := &loadAgent{name: *name, out: stdout, rep: rep, mode: *input}
	a.ask() // with bracketed paste turned on first, in the same write
	buf := make([]byte, 64<<10)
	for {
		n, err := stdin.Read(buf)
		if n > 0 {
			a.input(buf[:n], time.Now())
		}
		if err != nil {
			return 0
		}
	}
}

// loadAgent is the load agent's state: what it was typed so far.
type loadAgent struct {
	name    string
	mode    string // --input: echo, raw, canon
	out     io.Writer
	rep     net.Conn
	round   int
	tasks   []string  // proxy tasks it keeps
	pending []byte    // input not yet understood (a marker split across reads)
	inPaste bool      // between ESC[200~ and ESC[201~
	text    []byte    // the text typed since the last Enter
	landed  time.Time // the text arrived whole
}

const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// ask prints the next question.
func (a *loadAgent) ask() {
	a.round++
	mode := ""
	if a.round == 1 {
		mode = "\x1b[?2004h"
	}
	fmt.Fprintf(a.out, "%s[ASK_USER]\r\nquestion: Load round %d for %s: go on?\r\ntype: text\r\n[/ASK_USER]\r\n> ", mode, a.round, a.name)
}

// input takes one read of the terminal at now.
func (a *loadAgent) input(p []byte, now time.Time) {
	b := append(a.pending, p...)
	a.pending = nil
	for len(b) > 0 {
		if a.inPaste {
			i := bytes.Index(b, []byte(pasteEnd))
			if i < 0 {
				keep := partialSuffix(b, pasteEnd)
				a.echo(b[:len(b)-keep])
				a.pending = append(a.pending, b[len(b)-keep:]...)
				return
			}
			a.echo(b[:i])
			a.inPaste = false
			a.landed = now
			b = b[i+len(pasteEnd):]
			continue
		}
		switch c := b[0]; {
		case bytes.HasPrefix(b, []byte(pasteStart)):
			a.inPaste = true
			b = b[len(pasteStart):]
			continue
		case c == 0x1b && len(b) < len(pasteStart) && strings.HasPrefix(pasteStart, string(b)):
			a.pending = append(a.pending, b...)
			return
		case c == '\r' || c == '\n':
			// Early: the Enter came in the same read as the end of the
			// text, before the agent could show it. In canonical mode
			// the terminal holds the line until its Enter: never early.
			a.enter(now, a.mode != "canon" && a.landed.Equal(now) && len(a.text) > 0)
		default:
			a.echo(b[:1])
			a.landed = now
		}
		b = b[1:]
	}
}

// echo records typed text, and shows it with --input echo.
func (a *loadAgent) echo(p []byte) {
	if len(p) == 0 {
		return
	}
	a.text = append(a.text, p...)
	if a.mode != "echo" {
		return
	}
	s := strings.ReplaceAll(strings.ReplaceAll(string(p), "\r\n", "\n"), "\r", "\n")
	io.WriteString(a.out, strings.ReplaceAll(s, "\n", "\r\n"))
}

// What the office types, as the load agent tells it apart.
var (
	invokeAnswer = regexp.MustCompile(`\binvoke (a[0-9]+)\b`)
	taskFrom     = regexp.MustCompile(`Task \S+ from (\S+):`)
	proxyAnswer  = regexp.MustCompile(`\bproxy (a[0-9]+)\b`)
	proxyFrom    = regexp.MustCompile(`Proxy request from (\S+) \(create_plan`)
	proxyTaskID  = regexp.MustCompile(`- (\S+) \(priority`)
)

// enter submits the typed text: the times go to the driver, the agent
// replies: asks again, gives a task, or delivers a task's result.
func (a *loadAgent) enter(now time.Time, early bool) {
	if len(a.text) == 0 {
		return
	}
	text := string(a.text)
	what := "other"
	switch {
	case strings.Contains(text, "Answer to question"):
		what = "answer"
	case strings.Contains(text, "[PROXY_RESPONSE]"):
		what = "response"
	case proxyFrom.MatchString(text):
		what = "proxyreq:" + proxyFrom.FindStringSubmatch(text)[1]
		for _, m := range proxyTaskID.FindAllStringSubmatch(text, -1) {
			a.tasks = append(a.tasks, m[1])
		}
	case strings.Contains(text, "updated a task it keeps for you") || strings.Contains(text, "(update_status)"):
		what = "told"
	case taskFrom.MatchString(text):
		what = "task"
	case strings.Contains(text, "Result from"):
		what = "result"
	}
	if a.rep != nil {
		e := 0
		if early {
			e = 1
		}
		fmt.Fprintf(a.rep, "%s %d %d %d %s", a.name, a.landed.UnixNano(), now.UnixNano(), e, what)
	}
	a.text = a.text[:0]
	io.WriteString(a.out, "\r\nok\r\n")
	switch m := invokeAnswer.FindStringSubmatch(text); {
	case what == "answer" && m != nil:
		block := fmt.Sprintf("[INVOKE:%s]\r\nLoad task from %s: reply with a result.\r\n[/INVOKE:%s]\r\n> ", m[1], a.name, m[1])
		printed := time.Now()
		io.WriteString(a.out, block)
		if a.rep != nil {
			fmt.Fprintf(a.rep, "printed %s %s %d", a.name, m[1], printed.UnixNano())
		}
	case what == "task":
		caller := taskFrom.FindStringSubmatch(text)[1]
		fmt.Fprintf(a.out, "[DELIVER_RESULT:%s]\r\ntype: message\r\ncontent: Load task done by %s.\r\n[/DELIVER_RESULT:%s]\r\n> ", caller, a.name, caller)
	case what == "answer" && proxyAnswer.MatchString(text):
		p := proxyAnswer.FindStringSubmatch(text)[1]
		block := fmt.Sprintf("[PROXY_REQUEST]\r\n{\"action\": \"create_plan\", \"requester\": %q, \"tasks\": [{\"content\": \"Load plan\"}], \"preferences\": {\"preferred_proxy\": %q, \"fallback_allowed\": false}}\r\n[/PROXY_REQUEST]\r\n> ", a.name, p)
		a.printed("proxy", p, block)
	case what == "answer" && strings.Contains(text, "close task") && len(a.tasks) > 0:
		t := a.tasks[0]
		a.tasks = a.tasks[1:]
		block := fmt.Sprintf("[PROXY_REQUEST]\r\n{\"action\": \"update_status\", \"requester\": %q, \"task_id\": %q, \"status\": \"completed\"}\r\n[/PROXY_REQUEST]\r\n> ", a.name, t)
		a.printed("closed", t, block)
	case what == "told" || strings.HasPrefix(what, "proxyreq:"):
		io.WriteString(a.out, "> ")
	default:
		a.ask()
	}
}

// printed prints a block and reports when: `<kind> <name> <about> <unix ns>`.
func (a *loadAgent) printed(kind, about, block string) {
	at := time.Now()
	io.WriteString(a.out, block)
	if a.rep != nil {
		fmt.Fprintf(a.rep, "%s %s %s %d", kind, a.name, about, at.UnixNano())
	}
}

// partialSuffix is the length of the longest suffix of b that is a proper
// prefix of marker.
func partialSuffix(b []byte, marker string) int {
	for n := min(len(b), len(marker)-1); n > 0; n-- {
		if strings.HasPrefix(marker, string(b[len(b)-n:])) {
			return n
		}
	}
	return 0
}

// makeCanonical puts the terminal on fd in canonical mode with echo off:
// the terminal hands over whole lines (Enter, CR mapped to NL), and shows
// nothing typed.
func makeCanonical(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return err
	}
	t.Iflag |= unix.ICRNL
	t.Lflag |= unix.ICANON
	t.Lflag &^= unix.ECHO | unix.ECHONL
	return unix.IoctlSetTermios(fd, unix.TCSETS, t)
}

// makeRaw puts the terminal on fd in raw mode (no echo, no line editing,
// Enter arrives as CR).
func makeRaw(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return err
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	return unix.IoctlSetTermios(fd, unix.TCSETS, t)
}
