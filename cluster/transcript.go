package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TranscriptPoll is how often followed transcripts are copied to the
// database: the most of a conversation a node that dies can lose.
const TranscriptPoll = 500 * time.Millisecond

// Transcripts keeps Claude Code transcripts in the database as they grow
// (office_cluster.transcripts, one row a line, keyed by its byte offset)
// and writes them back where Claude Code expects them before a resume on
// another node.
type Transcripts struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu    sync.Mutex
	tails map[tailKey]*tail
}

type tailKey struct{ officeID, agentID string }

// tail is one followed transcript file.
type tail struct {
	conversation string
	path         string
	off          int64 // bytes of the file already in the database
	known        bool  // off was read from the database
}

// NewTranscripts returns a keeper on pool; Run copies.
func NewTranscripts(pool *pgxpool.Pool, log *slog.Logger) *Transcripts {
	if log == nil {
		log = slog.Default()
	}
	return &Transcripts{pool: pool, log: log, tails: map[tailKey]*tail{}}
}

// Follow copies the agent's transcript at path (conversation id) to the
// database from now on, replacing what was followed for the agent before.
func (t *Transcripts) Follow(officeID, agentID, conversation, path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tailKey{officeID, agentID}
	if cur, ok := t.tails[k]; ok && cur.conversation == conversation && cur.path == path {
		return
	}
	t.tails[k] = &tail{conversation: conversation, path: path}
}

// Run copies every followed transcript each TranscriptPoll until ctx ends.
func (t *Transcripts) Run(ctx context.Context) {
	tk := time.NewTicker(TranscriptPoll)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		t.Sync(ctx, "")
	}
}

// Sync copies what is new in the followed transcripts of officeID (every
// office: "") now. Failures are logged; the next Sync tries again.
func (t *Transcripts) Sync(ctx context.Context, officeID string) {
	t.mu.Lock()
	var keys []tailKey
	for k := range t.tails {
		if officeID == "" || k.officeID == officeID {
			keys = append(keys, k)
		}
	}
	t.mu.Unlock()
	for _, k := range keys {
		t.mu.Lock()
		tl, ok := t.tails[k]
		t.mu.Unlock()
		if !ok {
			continue
		}
		if err := t.copy(ctx, k, tl); err != nil && ctx.Err() == nil {
			t.log.Warn("keep transcript in the database", "office", k.officeID, "agent", k.agentID, "err", err)
		}
	}
}

// Forget stops following officeID's transcripts (after a last Sync).
func (t *Transcripts) Forget(ctx context.Context, officeID string) {
	t.Sync(ctx, officeID)
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.tails {
		if k.officeID == officeID {
			delete(t.tails, k)
		}
	}
}

// stored returns how many bytes of the conversation the database holds.
func (t *Transcripts) stored(ctx context.Context, agentID, conversation string) (int64, error) {
	var n int64
	err := t.pool.QueryRow(ctx, `
		select coalesce(max(byte_offset + octet_length(line) + 1), 0) from office_cluster.transcripts
		where agent_id = $1 and conversation_id = $2`, agentID, conversation).Scan(&n)
	return n, err
}

// copy appends the complete lines past tl.off to the database.
func (t *Transcripts) copy(ctx context.Context, k tailKey, tl *tail) error {
	if !tl.known {
		n, err := t.stored(ctx, k.agentID, tl.conversation)
		if err != nil {
			return err
		}
		tl.off, tl.known = n, true
	}
	f, err := os.Open(tl.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // not written yet
	}
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, tl.off, 1<<62))
	if err != nil {
		return err
	}
	var offs []int64
	var lines []string
	pos := tl.off
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		offs, lines = append(offs, pos), append(lines, string(data[:i]))
		pos += int64(i) + 1
		data = data[i+1:]
	}
	if len(lines) == 0 {
		return nil
	}
	_, err = t.pool.Exec(ctx, `
		insert into office_cluster.transcripts (office_id, agent_id, conversation_id, byte_offset, line)
		select $1, $2, $3, o, l from unnest($4::bigint[], $5::text[]) as t(o, l)
		on conflict do nothing`, k.officeID, k.agentID, tl.conversation, offs, lines)
	if err != nil {
		return err
	}
	tl.off = pos
	return nil
}

// Restore writes the conversation's transcript from the database to path
// when the file there is missing or shorter than what the database holds
// (the conversation ran on another node), so that `claude --resume` finds
// it. It reports whether it wrote.
func (t *Transcripts) Restore(ctx context.Context, agentID, conversation, path string) (bool, error) {
	n, err := t.stored(ctx, agentID, conversation)
	if err != nil || n == 0 {
		return false, err
	}
	if st, err := os.Stat(path); err == nil && st.Size() >= n {
		return false, nil
	}
	rows, err := t.pool.Query(ctx, `
		select line from office_cluster.transcripts where agent_id = $1 and conversation_id = $2
		order by byte_offset`, agentID, conversation)
	if err != nil {
		return false, err
	}
	var buf bytes.Buffer
	var line string
	if _, err := pgx.ForEachRow(rows, []any{&line}, func() error {
		buf.WriteString(line)
		buf.WriteByte('\n')
		return nil
	}); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("transcript dir: %w", err)
	}
	tmp := path + ".restore"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return false, fmt.Errorf("write transcript: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, fmt.Errorf("write transcript: %w", err)
	}
	return true, nil
}
