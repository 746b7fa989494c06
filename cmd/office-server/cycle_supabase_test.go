package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// cycleRequestBudget is the most REST requests the serve command may make
// per answer cycle over Supabase (po asks, a member answers, po invokes
// dev, dev delivers, po asks again), counted by the PostgREST stand-in
// (docs/notes/store-functions.md lists each request of a cycle).
const cycleRequestBudget = 20

// TestSupabaseAnswerCycleRequests counts the REST requests the serve
// command makes per answer cycle of the demo office, by method and table
// (or function), over cycles answer cycles: the member's own
// answer_question calls are not counted, and the test reads the questions
// from the database directly so that only the server's requests are.
func TestSupabaseAnswerCycleRequests(t *testing.T) {
	p := supabasetest.New(t)
	r := startSupabaseMain(t, p)
	r.waitReady(t, "at start")
	oid := r.officeID(t)
	conn, err := pgx.Connect(context.Background(), p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	member := p.MemberOf(t, oid, "cycle@example.com")
	// pending waits for po's next pending question and returns it.
	seen := map[string]bool{}
	pending := func() (id, option string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			err := conn.QueryRow(context.Background(), `select id::text, options->>0 from public.user_questions
				where office_id = $1 and status = 'pending' order by created_at desc limit 1`, oid).Scan(&id, &option)
			if err == nil && !seen[id] {
				seen[id] = true
				return id, option
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("po asked no new question within 60s")
		return "", ""
	}
	id, option := pending()
	// One cycle first: what a server does once in its life is not a
	// cycle's (the Supabase store's first keyed event append learns that
	// PostgREST's on_conflict cannot name the partial unique index:
	// supabase/store.go AppendEvent).
	answerAsMember(t, p, member, id, option)
	id, option = pending()
	time.Sleep(2 * time.Second) // let the start settle
	p.REST.Counts()
	var firstEvent int64
	if err := conn.QueryRow(context.Background(), `select coalesce(max(id), 0) from public.office_events where office_id = $1`, oid).Scan(&firstEvent); err != nil {
		t.Fatal(err)
	}
	const cycles = 3
	for range cycles {
		answerAsMember(t, p, member, id, option)
		id, option = pending()
	}
	time.Sleep(time.Second) // the last cycle's trailing writes
	counts := p.REST.Counts()
	total := 0
	var keys []string
	for k, n := range counts {
		if k == "POST rpc/answer_question" { // the member's answers
			continue
		}
		total += n
		keys = append(keys, fmt.Sprintf("%s %.1f", k, float64(n)/cycles))
	}
	sort.Strings(keys)
	perCycle := float64(total) / cycles
	t.Logf("%.1f REST requests per answer cycle over %d cycles: %s", perCycle, cycles, strings.Join(keys, ", "))
	if perCycle > cycleRequestBudget {
		t.Errorf("%.1f REST requests per answer cycle; want at most %d", perCycle, cycleRequestBudget)
	}
	t.Logf("events per cycle: %s", eventKinds(t, conn, oid, firstEvent, cycles))
	var delivered int
	if err := conn.QueryRow(context.Background(), `select count(*) from public.user_questions where office_id = $1 and status = $2`, oid, office.QuestionDelivered).Scan(&delivered); err != nil || delivered < cycles {
		t.Errorf("%d questions delivered (%v); want at least %d", delivered, err, cycles)
	}
}

// eventKinds lists the office's events after id by kind, per cycle: what
// the requests counted wrote.
func eventKinds(t *testing.T, conn *pgx.Conn, officeID string, after int64, cycles int) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `select kind, count(*) from public.office_events
		where office_id = $1 and id > $2 group by kind order by kind`, officeID, after)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, fmt.Sprintf("%s %.1f", kind, float64(n)/float64(cycles)))
	}
	return strings.Join(kinds, ", ")
}
