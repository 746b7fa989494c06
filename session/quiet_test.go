package session

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/office-server/office-server/office"
)

// The test binary is also quietBox, a program that shows nothing of what
// it is typed, when started with quietBoxEnv=<mode>:
//
//   - raw: raw mode, no echo; at each Enter it prints "got:<line>." and a
//     prompt, or "joined:<line>." when the Enter came in the same read as
//     the end of the text (an Enter pressed before the program took the
//     text: a TUI that reads a burst as a paste joins them).
//   - canon: canonical mode with echo off (a password prompt, a line
//     reader piped a terminal): "got:<line>." for each line.
//   - mute: raw mode, no echo, and prints nothing at all after its prompt.
const quietBoxEnv = "SESSION_TEST_QUIETBOX"

func init() {
	if mode := os.Getenv(quietBoxEnv); mode != "" {
		os.Exit(quietBox(mode))
	}
}

func quietBox(mode string) int {
	t, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return 1
	}
	t.Lflag &^= unix.ECHO
	if mode != "canon" {
		t.Lflag &^= unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Iflag &^= unix.ICRNL | unix.IXON
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	}
	if err := unix.IoctlSetTermios(0, unix.TCSETS, t); err != nil {
		return 1
	}
	os.Stdout.WriteString("> ")
	if mode == "canon" {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			os.Stdout.WriteString("got:" + sc.Text() + ".\r\n> ")
		}
		return 0
	}
	var line []byte
	buf := make([]byte, 4096)
	for {
		n, err := os.Stdin.Read(buf)
		if err != nil {
			return 0
		}
		in := buf[:n]
		for len(in) > 0 {
			text, rest, enter := bytes.Cut(in, []byte("\r"))
			line = append(line, text...)
			in = rest
			if !enter || mode == "mute" {
				continue
			}
			what := "got"
			if len(text) > 0 {
				what = "joined"
			}
			fmt.Fprintf(os.Stdout, "\r\n%s:%s.\r\n> ", what, line)
			line = line[:0]
		}
	}
}

// TestEnterWithoutEcho: a program that shows nothing of its input gets its
// Enter as soon as it has taken the text, from the terminal itself: in raw
// mode once the input queue is read and the program reads its terminal
// again, in canonical mode at once (the line discipline holds the line).
// The bound (EnterDelay, 10 s here) is never what pressed it, no Enter
// comes in the same read as the text, and the text counts as received
// once the program read it through the Enter, never on a bound (silentAck).
func TestEnterWithoutEcho(t *testing.T) {
	for _, tc := range []struct {
		mode string
		sig  enterSignal
	}{{"raw", enterRead}, {"canon", enterCanonical}} {
		t.Run(tc.mode, func(t *testing.T) {
			checkGoroutines(t)
			r := newRecorder()
			m := newTestManager(t, r, Options{EnterDelay: 10 * time.Second})
			s, err := m.Start(context.Background(), Key{"o", tc.mode}, Spec{Kind: KindCommand, Command: os.Args[0], Env: []string{quietBoxEnv + "=" + tc.mode}, PromptPattern: `^>$`, Quiescence: 100 * time.Millisecond, Cols: 80, Rows: 24})
			if err != nil {
				t.Fatal(err)
			}
			r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
			const n = 5
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := s.Send(ctx, fmt.Sprintf("line %d of a text [INVOKE:x]", i))
				cancel()
				if err != nil {
					t.Fatalf("Send %d: %v", i, err)
				}
				want := fmt.Sprintf("got:line %d of a text [INVOKE:x].", i)
				r.waitFor(t, want, 10*time.Second, func(_ []Status, ts []Text) bool { return strings.Contains(joinTexts(ts), want) })
				r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
			}
			if _, ts := r.snapshot(); strings.Contains(joinTexts(ts), "joined:") {
				t.Errorf("an Enter came with the text:\n%s", joinTexts(ts))
			}
			for sig := enterCanonical; sig < enterSignals; sig++ {
				want := int64(0)
				if sig == tc.sig {
					want = n
				}
				if got := s.enters[sig].Load(); got != want {
					t.Errorf("Enters on %s: %d, want %d", enterSignalNames[sig], got, want)
				}
			}
			if got := s.boundAcks.Load(); got != 0 {
				t.Errorf("%d texts taken as received on a bound, want 0 (the input queue says when)", got)
			}
		})
	}
}

// TestDeliveredWhenRead: a program that prints nothing at all once it is
// typed to has received the text when its terminal's input queue is empty
// through the Enter, not after silentAck; one that does not read keeps it
// unacknowledged (TestCommandTypedAgainAfterCrash: it is typed again after
// the program's restart).
func TestDeliveredWhenRead(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{EnterDelay: 10 * time.Second})
	s, err := m.Start(context.Background(), Key{"o", "mute"}, Spec{Kind: KindCommand, Command: os.Args[0], Env: []string{quietBoxEnv + "=mute"}, PromptPattern: `^>$`, Quiescence: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Send(ctx, "a task for a program that says nothing"); err != nil {
		t.Fatal(err)
	}
	if got := s.enters[enterRead].Load(); got != 1 {
		t.Errorf("Enters on read: %d, want 1 (bound: %d)", got, s.enters[enterBound].Load())
	}
	if got := s.boundAcks.Load(); got != 0 {
		t.Errorf("received on a bound (%d), want on the input queue", got)
	}
}

// checkEntersOnEcho: a CLI that draws its input box and waits for its
// terminal in epoll (Codex, Gemini CLI, Qwen Code; Claude Code in
// TestClaudeEnterWhenLanded) must get its Enters on its echo: the input
// queue's signals never fire for it (it also times pastes, so the queue
// read is no sign it is done with the text).
func checkEntersOnEcho(t *testing.T, s *Session) {
	t.Helper()
	if r, c := s.enters[enterRead].Load(), s.enters[enterCanonical].Load(); r+c > 0 {
		t.Errorf("Enters on the input queue: %d on read, %d canonical; want every one on the echo (%d) or the bound (%d)", r, c, s.enters[enterEcho].Load(), s.enters[enterBound].Load())
	}
}
