package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
)

// askerScript asks a question without context, then repeats what it is
// told.
const askerScript = `printf '[ASK_USER]\nquestion: Which database should the service use?\ntype: selection\noptions: PostgreSQL, SQLite\n[/ASK_USER]\n'
echo 'asker>'
while IFS= read -r l; do echo "got: $l"; echo 'asker>'; done
`

// dialogScript is a CLI that, given a task (the office types a message
// as a header line and the text quoted with "> "), shows a tool-approval dialog
// as the agent CLIs draw it (a question, numbered choices, a marker on the
// selected one), moved with the arrow keys and chosen with Enter.
const dialogScript = `
labels='Yes|Yes, and do not ask again for rm|No, and tell the agent what to do differently'
opt() { echo "$labels" | cut -d'|' -f"$1"; }
lines() {
  i=1; while [ $i -le 3 ]; do
    if [ $i -eq $sel ]; then m='❯'; else m=' '; fi
    printf '\033[K %s %d. %s\n' "$m" $i "$(opt $i)"; i=$((i+1))
  done
}
echo 'dlg>'
while IFS= read -r task; do
  case "$task" in '> '*) task=${task#> };; *) continue;; esac # the message's last line
  sel=1
  printf 'Bash command: rm -rf build (for %s)\nDo you want to proceed?\n' "$task"
  lines
  stty -icanon -echo
  while :; do
    k=$(dd bs=1 count=1 2>/dev/null)
    if [ "$k" = "$(printf '\033')" ]; then
      k=$(dd bs=1 count=2 2>/dev/null)
      case "$k" in '[A') [ $sel -gt 1 ] && sel=$((sel-1));; '[B') [ $sel -lt 3 ] && sel=$((sel+1));; esac
      printf '\033[3A\r'; lines
    elif [ -z "$k" ]; then break; fi
  done
  stty icanon echo
  echo "chose: $sel $(opt $sel)"
  echo 'dlg>'
done
`

// TestConsoleAnswersWhereAsked answers, in headless Chromium, each thing
// that waits for a person where the console shows it: a question card
// (no "null" where it has no context; key n focuses its first option;
// its option button), a terminal
// dialog (its choices as buttons; the third sends exactly the keys that
// choose it); the agents' rows say who waits and link to the card; the
// "needs me" filter shows only them; stop asks to be confirmed.
func TestConsoleAnswersWhereAsked(t *testing.T) {
	bin := testenv.Chromium(t)
	dir := t.TempDir()
	for name, body := range map[string]string{"asker.sh": askerScript, "dialog.sh": dialogScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := startMainOffice(t, fmt.Sprintf(`
office:
  name: Answer office
agents:
  - name: asker
    launch: {kind: command, command: /bin/sh, args: [%q], prompt_pattern: "^asker>$"}
  - name: dlg
    launch: {kind: command, command: /bin/sh, args: [%q], prompt_pattern: "^dlg>$"}
`, filepath.Join(dir, "asker.sh"), filepath.Join(dir, "dialog.sh")))
	officeID := r.officeID(t)
	r.waitAgent(t, officeID, "dlg")
	ctx := chromeSized(t, bin, 1280, 800)
	w := &answerPage{t: t, ctx: ctx, r: r, officeID: officeID}
	w.question()
	w.dialog()
	w.confirmStop()
}

// answerPage is the console open on TestConsoleAnswersWhereAsked' office.
type answerPage struct {
	t        *testing.T
	ctx      context.Context
	r        *liveServer
	officeID string
}

func (w *answerPage) text(js string) string {
	s, err := chromedp.Run(w.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		w.t.Fatalf("%s: %v", js, err)
	}
	return s
}

func (w *answerPage) waitReplay(agent, want string) {
	t, r := w.t, w.r
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(r.replay(t, w.officeID, agent), want); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q:\n%s", agent, want, r.replay(t, w.officeID, agent))
		}
	}
}

// question: the card is clean, its row says it waits for a person, key
// n focuses its first option, the row links to it, and its option button
// answers it.
func (w *answerPage) question() {
	t, ctx, r := w.t, w.ctx, w.r
	// The question: clean, its row says it waits for a person.
	q := `#attention .card.question`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(r.base+"/?token="+r.token),
		chromedp.WaitVisible(chromedp.CSS(q+` button.option[data-option="SQLite"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.agent[data-name="asker"] a.waits`)),
	); err != nil {
		t.Fatalf("the question is not shown: %v", err)
	}
	card := w.text(`document.querySelector('` + q + `').innerText`)
	if strings.Contains(card, "null") || strings.Contains(card, "undefined") || !strings.Contains(card, "Which database should the service use?") {
		t.Errorf("question card %q: want the question, and no null where it has no context", card)
	}
	if w := w.text(`document.querySelector('tr.agent[data-name="asker"]').innerText`); !strings.Contains(w, "waits for you: a question") {
		t.Errorf("asker's row %q does not say it waits for a person", w)
	}
	// Key n: the next thing that needs me, its first answer focused.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("n")); err != nil {
		t.Fatal(err)
	}
	if f := w.text(`document.activeElement.closest('.card') ? document.activeElement.textContent : 'nothing: ' + document.activeElement.tagName`); f != "PostgreSQL" {
		t.Errorf("key n focused %q, want the question's first option", f)
	}
	saveScreenshot(t, ctx, "console-question-card.png")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr.agent[data-name="asker"] a.waits`)),
		chromedp.WaitVisible(chromedp.CSS(q+`.flash`)),
		chromedp.Click(chromedp.CSS(q+` button.option[data-option="SQLite"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(q)),
	); err != nil {
		t.Fatalf("answer by the option button: %v", err)
	}
	w.waitReplay("asker", "SQLite")

}

// dialog: a terminal dialog's choices are buttons, its row says it waits,
// the needs-me filter shows only it, and the third choice sends exactly
// the keys that choose it.
func (w *answerPage) dialog() {
	t, ctx, r, officeID := w.t, w.ctx, w.r, w.officeID
	// The dialog: its choices as buttons; the third is chosen.
	if st, body := r.do(t, "POST", "/api/offices/"+officeID+"/messages", `{"agent":"dlg","content":"deploy"}`); st/100 != 2 {
		t.Fatalf("message: %d %s", st, body)
	}
	d := `#attention .card.agent[data-name="dlg"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(d+` button.choice[data-choice="3"]`))); err != nil {
		t.Fatalf("the dialog's choices are not buttons: %v\n%s", err, r.replay(t, officeID, "dlg"))
	}
	choices := w.text(`[...document.querySelectorAll('` + d + ` button.choice')].map(b => b.textContent).join('|')`)
	if want := "1. Yes|2. Yes, and do not ask again for rm|3. No, and tell the agent what to do differently"; choices != want {
		t.Errorf("choices %q, want %q", choices, want)
	}
	if w := w.text(`document.querySelector('tr.agent[data-name="dlg"]').innerText`); !strings.Contains(w, "waits for you: a dialog") {
		t.Errorf("dlg's row %q does not say it waits for a person", w)
	}
	// The "needs me" filter shows only dlg.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#agentfilter button[data-filter="needs"]`))); err != nil {
		t.Fatal(err)
	}
	if rows := w.text(`[...document.querySelectorAll('#agents tbody tr')].map(r => r.dataset.name).join(',')`); rows != "dlg" {
		t.Errorf("the needs-me filter shows %q, want dlg", rows)
	}
	saveScreenshot(t, ctx, "console-dialog.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#agentfilter button[data-filter="all"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(d+` button.choice[data-choice="3"]`))); err != nil {
		t.Fatal(err)
	}
	w.waitReplay("dlg", "chose: 3 No, and tell the agent")
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(d))); err != nil {
		t.Errorf("the dialog's card stays after it was answered: %v", err)
	}

}

// confirmStop: stop asks to be confirmed: one click does nothing yet.
func (w *answerPage) confirmStop() {
	t, ctx, r, officeID := w.t, w.ctx, w.r, w.officeID
	// Stop asks to be confirmed: one click does nothing yet.
	stop := `tr.agent[data-name="asker"] button.stop`
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(stop))); err != nil {
		t.Fatal(err)
	}
	if b := w.text(`document.querySelector('` + stop + `').textContent`); b != "confirm stop" {
		t.Errorf("after one click the stop button says %q, want \"confirm stop\"", b)
	}
	saveScreenshot(t, ctx, "console-confirm.png")
	time.Sleep(time.Second)
	if s := agentSession(t, r, officeID, "asker"); s != "ready" {
		t.Fatalf("one click on stop changed the agent to %s", s)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(stop))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); agentSession(t, r, officeID, "asker") != "stopped"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("confirmed stop did not stop the agent (%s)", agentSession(t, r, officeID, "asker"))
		}
	}
}

func agentSession(t *testing.T, r *liveServer, officeID, name string) string {
	t.Helper()
	var a struct {
		Session string `json:"session_status"`
	}
	r.get(t, "/api/offices/"+officeID+"/agents/"+name, &a)
	return a.Session
}
