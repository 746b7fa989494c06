package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/office-server/office-server/office"
)

// The test binary is also slowBox, a program slow to take its input,
// when started with slowBoxEnv.
const slowBoxEnv = "SESSION_TEST_SLOWBOX=1"

func init() {
	if os.Getenv("SESSION_TEST_SLOWBOX") == "1" {
		os.Exit(slowBox())
	}
}

// slowBox stands in for a TUI under load: its screen already shows an
// earlier prompt ending like the next one; when keys come it redraws
// something else at once (a status line), and takes them 300 ms later. An
// Enter that came before it took the text is read in the same burst, as
// a line break of a paste ("joined:"); one after, as the line's end
// ("got:").
func slowBox() int {
	t, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return 1
	}
	t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG | unix.IEXTEN
	t.Iflag &^= unix.ICRNL | unix.IXON
	if err := unix.IoctlSetTermios(0, unix.TCSETS, t); err != nil {
		return 1
	}
	os.Stdout.WriteString("> message number xxxxxxxxxxxxx end\r\ngot: message number xxxxxxxxxxxxx end\r\n> ")
	var line []byte
	buf := make([]byte, 4096)
	for {
		n, err := os.Stdin.Read(buf)
		if err != nil {
			return 0
		}
		in := append([]byte(nil), buf[:n]...)
		if len(line) == 0 {
			os.Stdout.WriteString("\x1b7\x1b[1;70H*\x1b8") // a status line, at once
			time.Sleep(300 * time.Millisecond)
			for {
				fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
				if k, _ := unix.Poll(fds, 0); k <= 0 {
					break
				}
				n, err := os.Stdin.Read(buf)
				if err != nil {
					return 0
				}
				in = append(in, buf[:n]...)
			}
		}
		text, _, enter := bytes.Cut(in, []byte("\r"))
		switch {
		case enter && len(line) == 0 && len(text) > 0:
			os.Stdout.WriteString(string(text) + "\r\njoined: " + string(text) + "\r\n> ")
		case enter:
			line = append(line, text...)
			os.Stdout.WriteString("\r\ngot: " + string(line) + "\r\n> ")
			line = nil
		default:
			line = append(line, text...)
			os.Stdout.Write(text) // the echo: the text has landed
		}
	}
}

// TestEnterAfterTheEchoNotTheHistory: typed into a program whose screen
// shows an earlier prompt ending the same way, and which redraws something
// else before it takes the keys (a TUI under load), the text gets its
// Enter only once the program has echoed it, so it is submitted as a line,
// not joined to the text as a paste's line break. Sending Enter on the
// first output with the ending anywhere on screen failed here every time.
func TestEnterAfterTheEchoNotTheHistory(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{EnterDelay: 3 * time.Second})
	s, err := m.Start(context.Background(), Key{"o", "slow"}, Spec{Kind: KindCommand, Command: os.Args[0], Env: []string{slowBoxEnv}, PromptPattern: `^>$`, Quiescence: 100 * time.Millisecond, Cols: 80, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if err := s.Send(context.Background(), "message number xxxxxxxxxxxxxx end"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		screen := strings.Join(s.Screen(), "\n")
		if strings.Contains(screen, "joined:") {
			t.Fatalf("Enter came before the program took the text:\n%s", screen)
		}
		if strings.Contains(screen, "got: message number xxxxxxxxxxxxxx end") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line never came:\n%s", screen)
		}
	}
}

// TestEnterOnAFullScreen: on a full screen the echo of a typed text
// pushes the previous one, ending the same way, off the top, so the
// ending is on screen as often as before: what scrolled off counts too,
// and Enter comes on the echo, not after the EnterDelay bound (each text
// took it before).
//
// The ending spans two lines, as an office answer's does (the question's
// line, then the answer), and the screens are small: a previous ending is
// then at times half scrolled off (its start above the top, its end on the
// top row) as the new one lands. It must count as it did before the
// scroll, or the new ending is not seen as one more (the load driver's
// 250 ms p99 at 10 agents).
func TestEnterOnAFullScreen(t *testing.T) {
	for _, cols := range []int{80, 23, 17} {
		for _, rows := range []int{4, 5, 6, 7} {
			t.Run(fmt.Sprintf("%dx%d", cols, rows), func(t *testing.T) { enterOnAFullScreen(t, cols, rows) })
		}
	}
}

func enterOnAFullScreen(t *testing.T, cols, rows int) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{EnterDelay: 2 * time.Second})
	body := `printf '> '
n=0
while IFS= read -r line; do
  n=$((n+1))
  printf 'ack %d\n> ' "$n"
done
`
	s, err := m.Start(context.Background(), Key{"o", "full"}, Spec{Kind: KindCommand, Command: script(t, body), PromptPattern: `^>`, Quiescence: 100 * time.Millisecond, Cols: cols, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	for i := range 8 {
		began := time.Now()
		if err := s.Send(context.Background(), fmt.Sprintf("answer %d to (\"Load round: go on?\"):\n| yes, go on", i)); err != nil {
			t.Fatal(err)
		}
		ack := fmt.Sprintf("ack %d", 2*(i+1)) // two lines a text
		for !slices.ContainsFunc(s.Screen(), func(r string) bool { return strings.HasSuffix(strings.TrimRight(r, " "), ack) }) {
			if time.Since(began) > 10*time.Second {
				t.Fatalf("text %d never came:\n%s", i, strings.Join(s.Screen(), "\n"))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("text %d: Enter after %v, want on the echo (the bound is 2 s)", i, d.Round(time.Millisecond))
		}
	}
}
