package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// startSupabaseMain runs the serve command as a user would point it at a
// Supabase project created today: SUPABASE_URL and SUPABASE_SECRET_KEY in
// the environment (read by the same parseServeConfig as serveCmd), the example
// office (examples/demo-office.yaml) with its built-in agents (this test
// binary, through TestMain).
func startSupabaseMain(t *testing.T, p *supabasetest.Project) *liveServer {
	t.Helper()
	return startSupabaseMainWith(t, p, filepath.Join(testenv.RepoRoot(), "examples", "demo-office.yaml"))
}

// startSupabaseMainWith is startSupabaseMain with another office file.
func startSupabaseMainWith(t *testing.T, p *supabasetest.Project, officeFile string) *liveServer {
	t.Helper()
	t.Setenv("SUPABASE_URL", p.URL)
	t.Setenv("SUPABASE_SECRET_KEY", p.SecretKey)
	t.Setenv("SUPABASE_SERVICE_ROLE_KEY", "")
	t.Setenv("DATABASE_URL", "")
	t.Setenv("OFFICE_ADMIN_TOKEN", "")
	t.Setenv("OFFICE_SECRETS_KEY", testSecretsKey)
	// No JWT secret: members' tokens are verified against the project's
	// JWKS, as on a project created today (server/members.go).
	t.Setenv("SUPABASE_JWT_SECRET", "")
	dir := t.TempDir()
	cfg, err := parseServeConfig([]string{"--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--office", officeFile, "--shutdown-timeout", "10s"},
		os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if k := cfg.storeKind(); k != "supabase" {
		t.Fatalf("store kind %q from SUPABASE_URL; want supabase", k)
	}
	return runMain(t, cfg, filepath.Join(dir, "data"))
}

// readyz returns the status of /readyz (200: store reachable, feed
// connected and caught up).
func (r *liveServer) readyz(t *testing.T) int {
	t.Helper()
	res, err := http.Get(r.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// waitReady waits for /readyz to answer 200.
func (r *liveServer) waitReady(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for r.readyz(t) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 30s %s", when)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answerAsMember answers a pending question as the web frontend does with
// supabase-js (rpc('answer_question', {question_id, response}),
// docs/frontend.md), signed in as a member of the office: the function
// checks the answer before it writes and stamps answered_by and
// answered_at.
func answerAsMember(t *testing.T, p *supabasetest.Project, m supabasetest.Member, id, response string) {
	t.Helper()
	var row office.Question
	res, b, err := restAPI(t, p, p.PublishableKey, m.Token).send(http.MethodPost, "/rest/v1/rpc/answer_question", map[string]any{"question_id": id, "response": response}, &row)
	if err != nil || res.StatusCode != http.StatusOK || row.Status != office.QuestionAnswered || row.ID != id {
		t.Fatalf("member's answer: %v %s", err, b)
	}
}

// dropRealtime drops the server's Realtime socket, which must be joined,
// and returns the stand-in's join count at the drop.
func dropRealtime(t *testing.T, p *supabasetest.Project) int {
	t.Helper()
	joins := p.Realtime.Joins()
	if conns, joined := p.Realtime.Drop(); conns != 1 || joined != 1 {
		t.Fatalf("dropped %d Realtime connections, %d joined; want the server's one joined socket", conns, joined)
	}
	return joins
}

// TestServeSupabase: the serve command with SUPABASE_URL and
// SUPABASE_SERVICE_ROLE_KEY against the stand-in project (PostgREST's API
// over the real PostgreSQL with the real migrations, and a Realtime server
// sending real Phoenix frames) runs the demo office round trip that
// TestServePostgres and TestRunCommandEndToEnd run, twice, with the
// Realtime socket dropped in each round:
//  1. dropped before a member answers: the answer is written while the
//     socket is down, which Realtime never reports; it reaches po anyway;
//  2. dropped right after a member answers, while the live change may be
//     in flight.
//
// Each answer reaches po exactly once, dev's result completes each
// invocation, and the server is ready again after each drop.
func TestServeSupabase(t *testing.T) {
	p := supabasetest.New(t)
	r := startSupabaseMain(t, p)
	r.waitReady(t, "at start")
	if j := p.Realtime.Joins(); j < 1 {
		t.Fatalf("ready with %d Realtime joins", j)
	}
	if toks := p.Realtime.JoinTokens(); len(toks) == 0 || toks[0] != p.SecretKey {
		t.Errorf("Realtime joined with tokens %q; want the secret key", toks)
	}
	oid := r.officeID(t)
	member := p.MemberOf(t, oid, "member@example.com")

	rounds := []struct {
		answer     string
		dropBefore bool // drop before answering; else right after
	}{
		{"Dark mode", true},
		{"Notifications", false},
	}
	for i, rd := range rounds {
		q := r.waitQuestion(t, oid, office.QuestionPending, 60*time.Second)
		if !containsFold(q.Options, rd.answer) {
			t.Fatalf("round %d: question %q has options %q; want %q among them", i+1, q.Question, q.Options, rd.answer)
		}
		var joins int
		if rd.dropBefore {
			joins = dropRealtime(t, p)
			answerAsMember(t, p, member, q.ID, rd.answer)
			if p.Realtime.Joins() == joins {
				t.Logf("round %d: answered while the server's Realtime socket was down", i+1)
			}
		} else {
			answerAsMember(t, p, member, q.ID, rd.answer)
			joins = dropRealtime(t, p)
		}
		waitRoundDone(t, r, p, oid, i, q.ID, rd.answer, joins)
	}

	// Nothing lost, nothing twice: every answer delivered, each typed
	// into po once (the metric counts deliveries, the conditional
	// answered → delivered transition allows one per question).
	var delivered []office.Question
	r.get(t, "/api/offices/"+oid+"/questions?status=delivered", &delivered)
	if len(delivered) != len(rounds) {
		t.Errorf("%d questions delivered; want %d: %+v", len(delivered), len(rounds), delivered)
	}
	var completed []office.Invocation
	r.get(t, "/api/offices/"+oid+"/invocations?status=completed", &completed)
	if len(completed) != len(rounds) {
		t.Errorf("%d completed invocations; want %d", len(completed), len(rounds))
	}
	res, err := http.Get(r.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := fmt.Sprintf("office_answers_delivered_total %d\n", len(rounds)); !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack %q", strings.TrimSpace(want))
	}
	// The office's events went through the REST store.
	var events []json.RawMessage
	r.get(t, "/api/offices/"+oid+"/events", &events)
	if len(events) == 0 {
		t.Errorf("no events recorded through the REST store")
	}
	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if strings.Contains(r.logs.String(), p.SecretKey) {
		t.Errorf("the secret key appears in the logs")
	}
	t.Logf("%d rounds, %d Realtime joins, %d events", len(rounds), p.Realtime.Joins(), len(events))
}

// waitRoundDone: the invocation po gives dev carries the answer and
// completes; the question is delivered with it; the feed came back after
// the drop (a rejoin past joins, and ready).
func waitRoundDone(t *testing.T, r *liveServer, p *supabasetest.Project, oid string, i int, qID, answer string, joins int) {
	// The invocation po gives dev carries the answer, and completes.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var invs []office.Invocation
		r.get(t, "/api/offices/"+oid+"/invocations?status=completed", &invs)
		if hasReason(invs, answer) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: no completed invocation carrying %q within 60s; completed: %+v", i+1, answer, invs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var got office.Question
	r.get(t, "/api/questions/"+qID, &got)
	if got.Status != office.QuestionDelivered || got.DeliveredAt == nil || got.Response != answer {
		t.Errorf("round %d: question after the round: status %q, delivered_at %v, response %q; want delivered %q", i+1, got.Status, got.DeliveredAt, got.Response, answer)
	}
	// The feed came back: a rejoin, and ready.
	deadline = time.Now().Add(30 * time.Second)
	for p.Realtime.Joins() <= joins || r.readyz(t) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("round %d: no rejoin and /readyz 200 within 30s of the drop (joins %d, at the drop %d)", i+1, p.Realtime.Joins(), joins)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func containsFold(opts []string, s string) bool {
	for _, o := range opts {
		if strings.EqualFold(strings.TrimSpace(o), s) {
			return true
		}
	}
	return false
}

func hasReason(invs []office.Invocation, sub string) bool {
	for _, inv := range invs {
		if strings.Contains(inv.Reason, sub) {
			return true
		}
	}
	return false
}

// TestSupabaseJS runs supabase/jstest/test.mjs: the web frontend's jobs
// (docs/frontend.md) done with the official @supabase/supabase-js
// (package.json pins it; scripts/setup.sh installs it) against the
// stand-in project, with this serve command and the demo office behind
// it. Member A (an owner of office A) lists agents with their sessions and
// the pending questions, answers through answer_question (a wrong option
// refused before the write, a second answer 409, the UPDATE path closed),
// sees the next question and po's invocation arrive over Realtime, sends a
// message, manages members; member B (office B) answers nothing of A
// (404), gets 410 for an expired question, provides a package dependency,
// is refused an api_key (a secret) and rejects it; anon gets 401. A secret
// in po's env in the office file (stored by the server in launch_spec) must
// show in no column a member may read and in no live change of any
// published table. A third agent, scout, gives a task to an agent nobody
// has (member A reads the stored refusal and why) and asks for a package,
// which member A provides and the server delivers to scout.
func TestSupabaseJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "install Node.js (scripts/setup.sh needs it for npm ci)")
	}
	root := testenv.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@supabase", "supabase-js", "package.json")); err != nil {
		testenv.Missing(t, "@supabase/supabase-js", "run scripts/setup.sh (npm ci installs it from package-lock.json)")
	}
	canary := "tok-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	officeFile := demoOfficeWithScout(t, canary)
	p := supabasetest.New(t)
	r := startSupabaseMainWith(t, p, officeFile)
	r.waitReady(t, "at start")
	officeA := r.officeID(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	must := func(sql string, args ...any) string {
		t.Helper()
		return mustScan(t, conn, sql, args...)
	}
	bo := officeBRows(t, conn)
	if got := must(`select coalesce(launch_spec #>> '{env,DEPLOY_TOKEN}', '') from public.office_agents where office_id = $1 and name = 'po'`, officeA); !strings.HasPrefix(got, "sealed:") || strings.Contains(got, canary) {
		t.Fatalf("po's launch_spec env DEPLOY_TOKEN = %q; want the office file's secret sealed", got)
	}
	readableJSON, published := memberReadable(t, conn)
	a := p.MemberOf(t, officeA, "a@example.com")
	must(`update public.office_members set role = 'owner' where user_id = $1 returning role`, a.ID)
	b := p.MemberOf(t, bo.office, "b@example.com")
	// newcomer@example.com has no account when member A invites them
	// (check 16); they sign up once invited (the loop below adds their
	// auth.users row) and join with their own token (check 24).
	newcomerID := uuid.NewString()
	newcomerToken := p.SignMember(p.MemberClaims(newcomerID, "newcomer@example.com", false))

	// The agents' rows change while the suite watches (as when the server
	// records a status): each UPDATE carries the row over Realtime.
	stopTouch := touchAgents(ctx, p.DatabaseURL, officeA, newcomerID)
	nodeCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(nodeCtx, node, filepath.Join(root, "supabase", "jstest", "test.mjs"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SUPABASE_URL="+p.URL, "PUBLISHABLE_KEY="+p.PublishableKey,
		"TOKEN_A="+a.Token, "USER_A="+a.ID, "TOKEN_B="+b.Token, "USER_B="+b.ID,
		"OFFICE_A="+officeA, "OFFICE_B="+bo.office, "CANARY="+canary, "READABLE="+string(readableJSON), "PUBLISHED="+strings.Join(published, ","),
		"EXPIRED_B="+bo.expired, "DEP_PKG_B="+bo.pkg, "DEP_KEY_B="+bo.key,
		"SERVER_URL="+r.base, "TOKEN_NEW="+newcomerToken, "USER_NEW="+newcomerID, "DEP_SECRET_B="+bo.secret, "DEP_ENV_B="+bo.env, "DEP_LATE_B="+bo.late)
	out, err := cmd.CombinedOutput()
	stopTouch()
	t.Logf("node supabase/jstest/test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("supabase-js suite failed: %v", err)
	}
	checkSuitePlan(t, string(out))
	// The provided value is stored in the office's sealed form, which the
	// server opens (office.Sealer: 'P' and the text for a value in clear).
	var sealed []byte
	if err := conn.QueryRow(ctx, `select value from public.dependency_requests where id = $1`, bo.pkg).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	var none office.Sealer
	if v, err := none.Open(sealed); err != nil || v != "socket.io" {
		t.Errorf("provided value opens to %q, %v; want socket.io", v, err)
	}
	// The secret member B gave the server is stored encrypted under the
	// server's key, never in clear.
	checkSealedSecret(t, conn, bo.secret, "sk-live-member-b-0123456789")
	adminManagesMembers(t, r, p, officeA, a, b)
}

// mustScan returns the one text value sql selects, failing the test on
// an error.
func mustScan(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// officeBIDs is TestSupabaseJS' second office, of member B, with its agent
// helper's expired question and dependency requests.
type officeBIDs struct {
	office, expired, pkg, key, secret, env, late string
}

func officeBRows(t *testing.T, conn *pgx.Conn) officeBIDs {
	officeB := mustScan(t, conn, `insert into public.offices (name) values ('Office B') returning id::text`)
	agentB := mustScan(t, conn, `insert into public.office_agents (office_id, name) values ($1, 'helper') returning id::text`, officeB)
	expiredB := mustScan(t, conn, `insert into public.user_questions (office_id, agent_id, question, expires_at)
		values ($1, $2, 'Too late?', now() - interval '1 minute') returning id::text`, officeB, agentB)
	depPkg := mustScan(t, conn, `insert into public.dependency_requests (office_id, agent_id, type, name, expires_at)
		values ($1, $2, 'package', 'realtime library', now() + interval '1 hour') returning id::text`, officeB, agentB)
	depKey := mustScan(t, conn, `insert into public.dependency_requests (office_id, agent_id, type, name, expires_at)
		values ($1, $2, 'api_key', 'OPENAI_API_KEY', now() + interval '1 hour') returning id::text`, officeB, agentB)
	depSecret := mustScan(t, conn, `insert into public.dependency_requests (office_id, agent_id, type, name, expires_at)
		values ($1, $2, 'api_key', 'DEPLOY_KEY', now() + interval '1 hour') returning id::text`, officeB, agentB)
	depEnv := mustScan(t, conn, `insert into public.dependency_requests (office_id, agent_id, type, name, expires_at)
		values ($1, $2, 'env_variable', 'REGION', now() + interval '1 hour') returning id::text`, officeB, agentB)
	depLate := mustScan(t, conn, `insert into public.dependency_requests (office_id, agent_id, type, name, expires_at)
		values ($1, $2, 'api_key', 'LATE_KEY', now() - interval '1 minute') returning id::text`, officeB, agentB)
	return officeBIDs{office: officeB, expired: expiredB, pkg: depPkg, key: depKey, secret: depSecret, env: depEnv, late: depLate}
}

// memberReadable returns the columns a member may read, from the grants
// themselves (every column of every table and view of the public schema,
// so a new one is checked without naming it), as JSON, and the tables
// Realtime publishes, from the publication itself.
func memberReadable(t *testing.T, conn *pgx.Conn) ([]byte, []string) {
	ctx := context.Background()
	readable := map[string][]string{}
	rows, err := conn.Query(ctx, `select c.table_name::text, c.column_name::text from information_schema.columns c
		where c.table_schema = 'public'
		  and has_column_privilege('authenticated', format('public.%I', c.table_name), c.column_name, 'SELECT')
		order by c.table_name, c.ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, col string
		if err := rows.Scan(&tbl, &col); err != nil {
			t.Fatal(err)
		}
		readable[tbl] = append(readable[tbl], col)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	readableJSON, _ := json.Marshal(readable)
	var published []string
	if err := conn.QueryRow(ctx, `select coalesce(array_agg(tablename::text order by tablename), '{}') from pg_publication_tables
		where pubname = 'supabase_realtime' and schemaname = 'public'`).Scan(&published); err != nil {
		t.Fatal(err)
	}
	return readableJSON, published
}

// touchAgents updates office's agents' rows every half second, and signs
// newcomer up once invited, until the returned stop is called.
func touchAgents(ctx context.Context, dbURL, officeA, newcomerID string) (stop func()) {
	touchCtx, stopTouch := context.WithCancel(ctx)
	touched := make(chan struct{})
	go func() {
		defer close(touched)
		c, err := pgx.Connect(touchCtx, dbURL)
		if err != nil {
			return
		}
		defer c.Close(context.WithoutCancel(touchCtx))
		for touchCtx.Err() == nil {
			c.Exec(touchCtx, `update public.office_agents set updated_at = now() where office_id = $1`, officeA)
			c.Exec(touchCtx, `insert into auth.users (id, email, aud, role) select $1, 'newcomer@example.com', 'authenticated', 'authenticated'
				where exists (select 1 from public.office_invitations where email = 'newcomer@example.com') on conflict do nothing`, newcomerID)
			select {
			case <-touchCtx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()

	return func() { stopTouch(); <-touched }
}

// checkSuitePlan: every check the suite plans ran and passed (1..N and N
// "ok" lines), and the suite holds at least the checks named here.
func checkSuitePlan(t *testing.T, out string) {
	plan := regexp.MustCompile(`(?m)^1\.\.(\d+)$`).FindStringSubmatch(out)
	oks := regexp.MustCompile(`(?m)^ok \d+ - `).FindAllString(out, -1)
	if plan == nil || strconv.Itoa(len(oks)) != plan[1] {
		t.Errorf("supabase-js suite: plan %v, %d checks passed", plan, len(oks))
	}
	for _, name := range []string{"no secret reaches a member", "a member cannot read office_events.raw"} {
		if !strings.Contains(out, " - "+name) {
			t.Errorf("supabase-js suite did not run the check %q", name)
		}
	}
}

// demoOfficeWithScout writes examples/demo-office.yaml with a secret in
// po's env, as people write tokens into an office file
// (office.LaunchSpec.Env; the server stores it sealed in
// office_agents.launch_spec), and a third agent, scout, which at start
// gives a task to an agent nobody has (the office refuses it, and members
// must see the refusal and why), asks for a package (type package, name
// left-pad), and then echoes what it is sent ("scout got: …").
func demoOfficeWithScout(t *testing.T, secret string) string {
	t.Helper()
	demo, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "demo-office.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withEnv := strings.Replace(string(demo), "      script: po\n", "      script: po\n      env:\n        DEPLOY_TOKEN: "+secret+"\n", 1)
	if withEnv == string(demo) {
		t.Fatal("examples/demo-office.yaml: po's launch not found")
	}
	withEnv += `  - name: scout
    role: Scout
    allowed_actions: [invoke, dependency_request]
    launch:
      kind: command
      command: /bin/sh
      args: [-c, "echo '[INVOKE:ghost]'; echo 'find the ghost'; echo '[/INVOKE:ghost]'; echo '[DEPENDENCY_REQUEST]'; echo 'type: package'; echo 'name: left-pad'; echo 'description: scout needs it'; echo 'required: false'; echo '[/DEPENDENCY_REQUEST]'; echo 'scout>'; while IFS= read -r l; do echo \"scout got: $l\"; echo 'scout>'; done"]
      prompt_pattern: "^scout>$"
`
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(officeFile, []byte(withEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	return officeFile
}

// TestSupabaseIdleRequests measures the REST requests per minute of the
// serve command with the demo office idle: po waits for an answer, dev
// waits for work, no console is open. The server learns of work from the
// Realtime feed; what it still sends when nothing happens are its timers.
func TestSupabaseIdleRequests(t *testing.T) {
	p := supabasetest.New(t)
	r := startSupabaseMain(t, p)
	r.waitReady(t, "at start")
	oid := r.officeID(t)
	r.waitQuestion(t, oid, office.QuestionPending, 60*time.Second)
	time.Sleep(2 * time.Second) // let the start settle
	p.REST.Counts()
	idle := idleWindow(t)
	time.Sleep(idle)
	counts := p.REST.Counts()
	total := 0
	var keys []string
	for k, n := range counts {
		total += n
		keys = append(keys, fmt.Sprintf("%s %.1f/min", k, float64(n)*float64(time.Minute)/float64(idle)))
	}
	sort.Strings(keys)
	perMin := float64(total) * float64(time.Minute) / float64(idle)
	t.Logf("idle: %.1f REST requests/min over %v (%s)", perMin, idle, strings.Join(keys, ", "))
	if perMin > idleRequestBudget {
		t.Errorf("idle server made %.1f REST requests/min; want at most %d", perMin, idleRequestBudget)
	}

	// Busy: a member answers every question po asks, at once, for the same
	// window (po → dev → po cycles back to back). The test finds the
	// questions in the database directly, so that only the server's own
	// requests are counted.
	member := p.MemberOf(t, oid, "busy@example.com")
	conn, err := pgx.Connect(context.Background(), p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	answered := 0
	const window = 30 * time.Second
	p.REST.Counts()
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		rows, _ := conn.Query(context.Background(), `select id::text, options->>0 from public.user_questions where office_id = $1 and status = 'pending'`, oid)
		pending, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ ID, Option string }])
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range pending {
			answerAsMember(t, p, member, q.ID, q.Option)
			answered++
		}
		time.Sleep(200 * time.Millisecond)
	}
	counts = p.REST.Counts()
	total, keys = 0, nil
	for k, n := range counts {
		if k != "POST rpc/answer_question" { // the member's answers
			total += n
			keys = append(keys, fmt.Sprintf("%s %.1f/min", k, float64(n)*float64(time.Minute)/float64(window)))
		}
	}
	sort.Strings(keys)
	t.Logf("busy: %.1f REST requests/min from the server (%d answers in %v; the member's own answer_question calls not counted): %s",
		float64(total)*float64(time.Minute)/float64(window), answered, window, strings.Join(keys, ", "))
}

// idleRequestBudget is the most REST requests per minute an idle server may
// make. History: 420/min while the event tail polled every 250 ms over
// Supabase, 182/min after, 242 with the proxy's parked requests on the 1 s
// tick, 18/min when the store was swept for expiries every 15 s, 5.6/min
// on average since the engine asks the store only when a deadline it knows
// of has come (engine/sweep.go), of which 2/min were the event tail's 30 s
// safety poll, now every 5 minutes. What is left: the Realtime feed's
// periodic catch-up, 3 reads a minute, and every 5 minutes the engine's
// safety net (3 list queries) and the event tail (1): 3.8/min on average.
const idleRequestBudget = 5

// idleWindow is how long TestSupabaseIdleRequests watches the idle server:
// 60 s, which holds exactly one of the Realtime feed's catch-ups (the
// 5-minute safety nets fall outside it), or OFFICE_IDLE_WINDOW (a Go
// duration) for the long-run average.
func idleWindow(t *testing.T) time.Duration {
	v := os.Getenv("OFFICE_IDLE_WINDOW")
	if v == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		t.Fatalf("OFFICE_IDLE_WINDOW=%q: want a Go duration of at least 1m", v)
	}
	return d
}
