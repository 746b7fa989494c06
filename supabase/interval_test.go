package supabase

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

func TestParseInterval(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"00:00:00", 0, false},
		{"00:05:00", 5 * time.Minute, false},
		{"01:02:03.5", time.Hour + 2*time.Minute + 3500*time.Millisecond, false},
		{"1 day", 24 * time.Hour, false},
		{"2 days 00:00:01", 48*time.Hour + time.Second, false},
		{"-00:00:01", -time.Second, false},
		{"00:00:00.000001", time.Microsecond, false},
		{"1 mon", 0, true},
		{"1 year 2 mons", 0, true},
		{"PT5M", 0, true},
		{"abc", 0, true},
	}
	for _, tc := range tests {
		got, err := parseInterval(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseInterval(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestIntervalRoundTrip writes TTLs through pgrest into the real interval
// column and reads them back.
func TestIntervalRoundTrip(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	for _, d := range []time.Duration{0, time.Second, 5 * time.Minute, 36 * time.Hour, 1500 * time.Millisecond} {
		o, err := e.store.UpsertOffice(ctx, office.Office{Name: "TTL " + d.String(), QuestionTTL: d})
		if err != nil {
			t.Fatalf("UpsertOffice(%v): %v", d, err)
		}
		got, err := e.store.GetOffice(ctx, o.ID)
		if err != nil || got.QuestionTTL != d {
			t.Errorf("QuestionTTL %v came back as %v, %v", d, got.QuestionTTL, err)
		}
	}
}

func FuzzParseInterval(f *testing.F) {
	for _, s := range []string{"00:05:00", "3 days 01:00:00", "-1 days -00:00:01", "1 mon", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseInterval(s)
		if err != nil {
			return
		}
		// What parses must survive the store's own encoding.
		b, err := json.Marshal(interval(d))
		if err != nil || !strings.HasSuffix(string(b), ` microseconds"`) {
			t.Errorf("marshal %v = %s, %v", d, b, err)
		}
	})
}

func TestBytea(t *testing.T) {
	for _, b := range [][]byte{{}, {0}, []byte("secret"), {0xff, 0x00, 0x7f}} {
		enc := encodeBytea(b).(string)
		got, err := decodeBytea(enc)
		if err != nil || string(got) != string(b) {
			t.Errorf("bytea %x → %q → %x, %v", b, enc, got, err)
		}
	}
	if encodeBytea(nil) != nil {
		t.Errorf("nil value must be NULL")
	}
	if _, err := decodeBytea(`secret`); err == nil {
		t.Errorf("escape-format bytea accepted")
	}
}

// TestAppendEventPartialIndex: office_events' dedupe key is a partial unique
// index (where dedupe_key is not null), which ON CONFLICT (office_id,
// dedupe_key) cannot infer without its predicate: PostgreSQL answers 42P10,
// so PostgREST's on_conflict cannot be used. The store notices once and
// falls back to insert + 23505 → the existing event.
func TestAppendEventPartialIndex(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	o, _ := e.store.UpsertOffice(ctx, office.Office{Name: "Events"})
	ev := office.Event{OfficeID: o.ID, Kind: "step", DedupeKey: "transcript:1"}
	first, inserted, err := e.store.AppendEvent(ctx, ev)
	if err != nil || !inserted {
		t.Fatalf("AppendEvent = %v, %v", inserted, err)
	}
	if !e.store.noOnConflict.Load() {
		t.Errorf("on_conflict accepted: the schema's dedupe index is no longer partial? then drop the fallback note in docs")
	}
	again, inserted, err := e.store.AppendEvent(ctx, ev)
	if err != nil || inserted || again.ID != first.ID {
		t.Errorf("AppendEvent(duplicate) = %+v, %v, %v; want event %d, inserted=false", again, inserted, err, first.ID)
	}
}
