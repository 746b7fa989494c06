package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// poolerUser is the user a client of the session pooler logs in as: on
// Supabase, postgres.<project-ref>.
const poolerUser = "postgres.abcdefghijklmnopqrst"

// sessionPooler starts PgBouncer (Debian's, installed by scripts/setup.sh)
// in session mode in front of the test PostgreSQL and returns dbURL as
// seen through it. It stands in for Supabase's session pooler (Supavisor in
// session mode, port 5432: each client connection gets one server
// connection for its whole session, so LISTEN, session settings and
// advisory locks work; supabase.com/docs/guides/database/connecting-to-postgres,
// "Supavisor session mode"): the client logs in as postgres.<ref> with the
// database password, and the pooler logs in to PostgreSQL as the
// database's own role, so a connection that bypassed the pooler would fail.
func sessionPooler(t *testing.T, dbURL string) string {
	t.Helper()
	bin := "/usr/sbin/pgbouncer"
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		bin = p
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "PgBouncer", "run scripts/setup.sh (apt-get install pgbouncer)")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// PgBouncer refuses to run as root: then it runs as postgres (-u),
	// which must read its files.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s user=%s password=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = plain
auth_file = %s
pool_mode = session
max_client_conn = 500
default_pool_size = 100
`, u.Hostname(), u.Port(), u.User.Username(), pw, port, filepath.Join(dir, "users.txt"))
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q %q\n", poolerUser, "pooler-pw")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bin, args...)
	logs := &lockedBuf{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pgbouncer:\n%s", logs.String())
		}
	})
	waitListening(t, port, logs)
	pooled := *u
	pooled.User = url.UserPassword(poolerUser, "pooler-pw")
	pooled.Host = fmt.Sprintf("127.0.0.1:%d", port)
	return pooled.String()
}

// TestServeThroughSessionPooler: serve with DATABASE_URL through a session
// pooler, as Supabase's Connect dialog gives it (user postgres.<ref>, the
// pooler's port): the migrations run (their advisory lock holds for the
// session), and a question answered in the database by another client, not
// through the server, reaches the agent: the LISTEN change feed works
// through the pooler.
func TestServeThroughSessionPooler(t *testing.T) {
	direct := testenv.NewDatabase(t)
	pooled := sessionPooler(t, direct)
	r := startMain(t, "--database-url", pooled)
	oid := r.officeID(t)
	q := r.waitQuestion(t, oid, office.QuestionPending, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "update user_questions set status = 'answered', response = 'Login page', answered_at = now() where id = $1 and status = 'pending'", q.ID); err != nil {
		t.Fatal(err)
	}
	for {
		var invs []office.Invocation
		r.get(t, "/api/offices/"+oid+"/invocations?status=completed", &invs)
		if len(invs) > 0 && strings.Contains(invs[0].Reason, "Login page") {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the answer written in the database never reached po through the pooled feed")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitListening waits up to 10 s for pgbouncer to listen on port.
func waitListening(t *testing.T, port int, logs *lockedBuf) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not listen: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
