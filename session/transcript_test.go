package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func entryLine(t *testing.T, typ, uuid string, side bool, stop string, texts ...string) string {
	t.Helper()
	var content []map[string]any
	for _, x := range texts {
		content = append(content, map[string]any{"type": "text", "text": x})
	}
	content = append(content, map[string]any{"type": "tool_use", "id": "t1", "name": "Bash", "input": map[string]any{}})
	msg := map[string]any{"role": typ, "content": content}
	if stop != "" {
		msg["stop_reason"] = stop
	} else {
		msg["stop_reason"] = nil
	}
	b, err := json.Marshal(map[string]any{"type": typ, "uuid": uuid, "isSidechain": side, "message": msg})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestTranscriptFollow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "projects", "x", "conv.jsonl")
	key := Key{"o", "a"}
	tr := newTranscript(path, "")

	// Not created yet.
	got, err := tr.poll(key)
	if err != nil || len(got) != 0 {
		t.Fatalf("poll before creation = %v, %v", got, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	user := `{"type":"user","uuid":"u1","message":{"role":"user","content":"[INVOKE:X] echo of typed text"}}` + "\n"
	a1 := entryLine(t, "assistant", "a1", false, "", "[ASK_USER]\n질문: 로그인 방식을 골라 주세요")
	side := entryLine(t, "assistant", "s1", true, "end_turn", "[INVOKE:Y] from a sub-agent")
	a2 := entryLine(t, "assistant", "a2", false, "end_turn", "[/ASK_USER]")

	write(user)
	write(a1[:20]) // partial line: nothing yet
	if got, _ := tr.poll(key); len(got) != 0 {
		t.Fatalf("partial line emitted: %v", got)
	}
	write(a1[20:])
	write(side)
	write(a2[:len(a2)-1]) // all but the newline
	got, err = tr.poll(key)
	if err != nil {
		t.Fatal(err)
	}
	want := []Text{{Key: key, ID: "a1", Source: FromTranscript, Lines: []string{"[ASK_USER]", "질문: 로그인 방식을 골라 주세요"}}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Fatalf("first poll (-got +want):\n%s", diff)
	}
	write("\n")
	got, _ = tr.poll(key)
	want = []Text{{Key: key, ID: "a2", Source: FromTranscript, Lines: []string{"[/ASK_USER]"}, TurnEnd: true}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Fatalf("second poll (-got +want):\n%s", diff)
	}
	write("not json\n")
	a3 := entryLine(t, "assistant", "a3", false, "end_turn", "done")
	write(a3)
	got, _ = tr.poll(key)
	if len(got) != 1 || got[0].ID != "a3" || tr.bad != 1 {
		t.Fatalf("after a bad line: %v (bad=%d)", got, tr.bad)
	}

	// A turn the transcript does not end (max_tokens): the Stop hook ends it.
	if _, ok := tr.stopped(key); ok {
		t.Error("stopped() after an end_turn")
	}
	write(entryLine(t, "assistant", "m1", false, "max_tokens", "cut sho"))
	if got, _ = tr.poll(key); len(got) != 1 || got[0].TurnEnd {
		t.Fatalf("max_tokens entry: %+v", got)
	}
	if end, ok := tr.stopped(key); !ok || end.ID != "m1/stop" || !end.TurnEnd {
		t.Errorf("stopped() = %+v, %v", end, ok)
	}
	if _, ok := tr.stopped(key); ok {
		t.Error("stopped() twice for one turn")
	}

	resumedFollowers(t, path, key, tr, write)
}

// resumedFollowers: a follower resuming after a2 (a restarted server)
// emits only a3 and m1; the cursor may be a Stop-hook turn end; a cursor
// that is not in the file counts what is there as consumed; what is
// appended later every follower emits.
func resumedFollowers(t *testing.T, path string, key Key, tr *transcript, write func(string)) {
	tr2 := newTranscript(path, "a2")
	got, _ := tr2.poll(key)
	if len(got) != 2 || got[0].ID != "a3" || got[1].ID != "m1" {
		t.Fatalf("resumed after a2: %v", got)
	}
	// The cursor may be a Stop-hook turn end.
	if got, _ := newTranscript(path, "m1/stop").poll(key); len(got) != 0 {
		t.Fatalf("resumed after m1/stop: %v", got)
	}

	// A cursor that is not in the file: what is there counts as consumed,
	// what is appended later is emitted.
	tr3 := newTranscript(path, "no-such-uuid")
	if got, _ := tr3.poll(key); len(got) != 0 || !tr3.cursorMissing {
		t.Fatalf("unknown cursor: emitted %v (missing=%v)", got, tr3.cursorMissing)
	}
	write(entryLine(t, "assistant", "a4", false, "end_turn", "new"))
	for _, f := range []*transcript{tr, tr2, tr3} {
		got, _ := f.poll(key)
		if len(got) != 1 || got[0].ID != "a4" || got[0].Lines[0] != "new" {
			t.Errorf("after append: %v", got)
		}
	}
}

// FuzzTranscript feeds arbitrary bytes, in two chunks, to the follower: it
// must not fail, and splitting the input anywhere must not change what it
// emits.
func FuzzTranscript(f *testing.F) {
	f.Add([]byte(`{"type":"assistant","uuid":"a","message":{"content":[{"type":"text","text":"x\ny"}],"stop_reason":"end_turn"}}`+"\n"), 17)
	f.Add([]byte(`{"type":"assistant","uuid":"b","message":{"content":"plain"}}`+"\n{bad\n"), 3)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if cut < 0 || cut > len(data) {
			cut = len(data) / 2
		}
		dir := t.TempDir()
		whole := filepath.Join(dir, "whole.jsonl")
		split := filepath.Join(dir, "split.jsonl")
		if err := os.WriteFile(whole, data, 0o600); err != nil {
			t.Fatal(err)
		}
		key := Key{"o", "a"}
		want, err := newTranscript(whole, "").poll(key)
		if err != nil {
			t.Fatal(err)
		}
		tr := newTranscript(split, "")
		if err := os.WriteFile(split, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := tr.poll(key)
		if err != nil {
			t.Fatal(err)
		}
		fh, err := os.OpenFile(split, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.Write(data[cut:]); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		more, err := tr.poll(key)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, more...)
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("split at %d changes the output (-got +want):\n%s", cut, diff)
		}
	})
}

// FuzzModeTracker: feeding the stream in two chunks gives the same mode
// state as feeding it whole.
func FuzzModeTracker(f *testing.F) {
	f.Add([]byte("\x1b[?2004h\x1b[?1049;2004l\x1b[?2004h"), 5)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if cut < 0 || cut > len(data) {
			cut = len(data) / 2
		}
		var a, b modeTracker
		a.write(data)
		b.write(data[:cut])
		b.write(data[cut:])
		if a.paste != b.paste {
			t.Errorf("split at %d: paste %v vs %v", cut, a.paste, b.paste)
		}
	})
}
