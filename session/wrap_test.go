package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mattn/go-runewidth"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
)

// longQuestion is a question of 300+ characters mixing Hangul (two
// columns), ASCII words and [tags]; on an 80-column terminal it wraps over
// several rows, among them a row where a syllable does not fit in the last
// column and wraps whole (the row then ends in a blank that is not the
// program's).
func longQuestion() string {
	q := "배포 전에 꼭 확인이 필요합니다: 새 결제 모듈(payment-v2)을 production 환경에 올리면 기존 사용자 세션이 모두 만료되고, " +
		"[INVOKE:X] 같은 표기가 로그에 남을 수 있으며, 데이터베이스 마이그레이션 0042_add_ledger 가 약 15분 동안 테이블 잠금을 잡습니다. " +
		"지금 바로 배포할까요, 아니면 트래픽이 적은 새벽 3시(KST)까지 기다렸다가 자동으로 배포할까요? 그리고 실패하면 즉시 롤백할지도 알려 주세요. " +
		"참고로 지난번 배포(v1.9.3)는 롤백에 7분이 걸렸고, 그동안 결제 실패율이 2.4%까지 올라갔습니다; 같은 일이 반복되면 고객 지원팀에 미리 알려야 합니다."
	return q
}

// TestWrappedLinesJoined: a command agent prints an [ASK_USER] block whose
// question line is far longer than the 80-column terminal is wide; the
// parser gets the exact question, whether the block is read from the live
// area at turn end or scrolls off the top (then partly, with its last rows
// still visible, or wholly).
func TestWrappedLinesJoined(t *testing.T) {
	checkGoroutines(t)
	q := longQuestion()
	if n := len([]rune(q)); n < 300 {
		t.Fatalf("question has %d characters, want 300+", n)
	}
	if w := runewidth.StringWidth("질문: " + q); w < 3*80 {
		t.Fatalf("question is %d columns, want more than 3 rows", w)
	}
	dir := t.TempDir()
	block := filepath.Join(dir, "block.txt")
	body := "[ASK_USER]\n질문: " + q + "\n타입: confirmation\n[/ASK_USER]\n"
	if err := os.WriteFile(block, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// Turn n prints the block after n filler lines... then "tail" lines
	// after it: 0 keeps it on screen, 3 scrolls part of the question off
	// (10 rows), 20 scrolls it all off.
	agent := script(t, fmt.Sprintf(`printf '> '
while IFS= read -r n; do
  echo "turn $n"
  cat %q
  i=0; while [ $i -lt "$n" ]; do echo "tail $i"; i=$((i+1)); done
  printf '> '
done`, block))
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	s, err := m.Start(ctx, Key{"o", "wrap-out"}, Spec{Kind: KindCommand, Command: agent, PromptPattern: `^>`, Quiescence: 100 * time.Millisecond, Cols: 80, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	for _, n := range []int{0, 3, 20} {
		t.Run(fmt.Sprintf("tail%d", n), func(t *testing.T) {
			before := len(r.lines())
			if err := s.Send(ctx, fmt.Sprint(n)); err != nil {
				t.Fatal(err)
			}
			want := 1 + 4 + n // "turn n", the block, the tail
			r.waitFor(t, "the turn", 10*time.Second, func(st []Status, _ []Text) bool {
				return lastStatus(st) == office.SessionReady && len(r.lines()) >= before+want
			})
			got := r.lines()[before:]
			p := protocol.NewParser(protocol.Options{})
			var msgs []protocol.Message
			for _, l := range got {
				msgs = append(msgs, p.Feed(l)...)
			}
			msgs = append(msgs, p.Flush()...)
			if len(msgs) != 1 || msgs[0].Kind != protocol.KindAskUser || msgs[0].Question == nil {
				t.Fatalf("messages %+v from lines %q", msgs, got)
			}
			if diff := cmp.Diff(msgs[0].Question.Question, q); diff != "" {
				t.Errorf("question (-got +want):\n%s\nlines: %q", diff, got)
			}
			wantLines := append([]string{fmt.Sprint("turn ", n)}, strings.Split(strings.TrimSuffix(body, "\n"), "\n")...)
			for i := range n {
				wantLines = append(wantLines, fmt.Sprint("tail ", i))
			}
			if diff := cmp.Diff(got, wantLines); diff != "" {
				t.Errorf("lines (-got +want):\n%s", diff)
			}
		})
	}
}

// TestJoinRowsUnit covers the wrapped-row join on the screen model alone,
// in every chunk size: scrolled-off wrapped rows and the live area.
func TestJoinRowsUnit(t *testing.T) {
	q := "질문: " + longQuestion()
	data := []byte("first\r\n" + q + "\r\nafter\r\n")
	for _, rows := range []int{3, 5, 24} {
		for size := 1; size <= 97; size += 8 {
			x := &screenLines{scr: newScreen(80, rows), cols: 80}
			var got []string
			for off := 0; off < len(data); off += size {
				x.write(data[off:min(off+size, len(data))])
				l, _ := x.take()
				got = append(got, l...)
			}
			x.turnEnd(nil)
			l, _ := x.take()
			got = append(got, l...)
			if diff := cmp.Diff(got, []string{"first", q, "after"}); diff != "" {
				t.Fatalf("rows %d, chunks of %d (-got +want):\n%s", rows, size, diff)
			}
		}
	}
}

// TestJoinRowsExact: on a 10-column screen, a space the program printed in
// the last column before a wide rune is kept, and a blank last column a
// wide rune skipped (wrapping whole) is dropped, whether the rows scroll
// off (wholly or partly) or are read from the live area at turn end.
func TestJoinRowsExact(t *testing.T) {
	lines := []string{
		"abcdefghi 가나",         // (a) real space in the last column
		"abcdefgh 가나",          // (b) 가 pushed over an empty last column
		"abcdefghi가나",          // (b) with no space at all
		"abcdefghi 가나다라마 바사 아", // (a), then a row of wide runes and a space at its end
		"a가나다라b마바사아자 카",        // two skipped columns
		"abcdefghi  가",         // a space in the last column after a space
	}
	for _, want := range lines {
		data := []byte("first\r\n" + want + "\r\nafter\r\n")
		for _, rows := range []int{2, 3, 8} {
			for _, size := range []int{1, 3, len(data)} {
				x := &screenLines{scr: newScreen(10, rows), cols: 10}
				var got []string
				for off := 0; off < len(data); off += size {
					x.write(data[off:min(off+size, len(data))])
					l, _ := x.take()
					got = append(got, l...)
				}
				x.turnEnd(nil)
				l, _ := x.take()
				got = append(got, l...)
				if diff := cmp.Diff(got, []string{"first", want, "after"}); diff != "" {
					t.Errorf("%q on 10x%d, chunks of %d (-got +want):\n%s", want, rows, size, diff)
				}
			}
		}
	}
}
