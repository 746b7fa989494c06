// Package testenv finds the real parts the tests run against (PostgreSQL, the
// Claude Code binary, Chromium). When one is missing, a test skips with a
// message saying how to provide it, except under OFFICE_REQUIRE_ALL=1 (set by
// .ci/run), where it fails: in CI a skipped integration test is not a pass.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Required reports whether missing real parts must fail tests (CI).
func Required() bool { return os.Getenv("OFFICE_REQUIRE_ALL") == "1" }

// Missing skips t, or fails it under OFFICE_REQUIRE_ALL=1, saying what is
// missing and how to get it.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is required (OFFICE_REQUIRE_ALL=1) but missing: %s", what, how)
	}
	t.Skipf("%s missing, skipping: %s", what, how)
}

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// PostgresURL returns the URL of the test server's maintenance database, from
// DATABASE_URL_TEST, or the default that scripts/setup.sh creates.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL_TEST")
	if u == "" {
		u = "postgres://office:office@127.0.0.1:5432/office_test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		Missing(t, "PostgreSQL", fmt.Sprintf("run scripts/setup.sh (starts PostgreSQL 15 and creates role office) or set DATABASE_URL_TEST (%v)", err))
		return ""
	}
	conn.Close(ctx)
	return u
}

// NewDatabase creates an empty database of its own for t on the test server
// and returns its URL; it is dropped when t ends. Tests in different packages
// run in parallel, so each needs a database of its own.
func NewDatabase(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "office_t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create database "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "drop database if exists "+name+" with (force)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse DATABASE_URL_TEST: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// ClaudeBin returns the path of the real Claude Code binary: OFFICE_CLAUDE_BIN,
// else node_modules/.bin/claude in the repository (installed by
// scripts/setup.sh from package-lock.json).
func ClaudeBin(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("OFFICE_CLAUDE_BIN"), filepath.Join(RepoRoot(), "node_modules", ".bin", "claude")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	Missing(t, "Claude Code binary", "run scripts/setup.sh --cli claude (installs @anthropic-ai/claude-code from package-lock.json) or set OFFICE_CLAUDE_BIN")
	return ""
}

// Chromium returns the path of a Chromium binary: OFFICE_CHROMIUM_BIN, else
// chromium on PATH (Debian's package, installed by scripts/setup.sh).
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("OFFICE_CHROMIUM_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	Missing(t, "Chromium", "run scripts/setup.sh (apt-get install chromium) or set OFFICE_CHROMIUM_BIN")
	return ""
}

// CLIBin returns the path of a real CLI agent installed from npm by
// scripts/setup.sh (package-lock.json): node_modules/.bin/<name> in the
// repository (codex, qwen, gemini).
func CLIBin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, name+" CLI", "run scripts/setup.sh --npm (installs the CLIs package-lock.json pins)")
	}
	return p
}

// SupabaseCLI returns the path of the real Supabase CLI: OFFICE_SUPABASE_BIN,
// else node_modules/.bin/supabase in the repository (npm package supabase,
// pinned in package-lock.json, whose @supabase/cli-linux-x64 ships the
// binary; installed by scripts/setup.sh).
func SupabaseCLI(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("OFFICE_SUPABASE_BIN"), filepath.Join(RepoRoot(), "node_modules", ".bin", "supabase")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	Missing(t, "Supabase CLI", "run scripts/setup.sh (npm ci installs supabase from package-lock.json) or set OFFICE_SUPABASE_BIN")
	return ""
}
