package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// Sessions wraps the router's sessions (agents.Options.Wrap) for a node:
// nothing is started in or typed into an agent of an office the node does
// not hold now (Node.Owns, by its own clock: a paused node that wakes up
// does not act), and a Claude Code agent's transcript is brought back from
// the database before it resumes, then kept there as it grows.
type Sessions struct {
	engine.Sessions
	Node        *Node
	Transcripts *Transcripts
	// StateDir is agents.Options.StateDir: where each Claude Code agent's
	// configuration directory, and so its transcripts, are.
	StateDir string
	// Report, if set, records a status for an agent not started here (the
	// router's HandleStatus, as the session layer would report it): a
	// missing working folder.
	Report func(session.Key, session.Status, session.Info)

	mu      sync.Mutex
	started map[string]bool // agents of a kind not carried, started here
}

func (s *Sessions) owned(officeID string) error {
	if s.Node.Owns(officeID) {
		return nil
	}
	return office.Errorf(office.EUNAVAILABLE, "office %s is not run by this node (%s) now", officeID, s.Node.ID())
}

// Start starts the agent if this node holds its office.
func (s *Sessions) Start(ctx context.Context, spec engine.SessionSpec) error {
	if err := s.prepare(ctx, spec); err != nil {
		return err
	}
	return s.Sessions.Start(ctx, spec)
}

// Restart restarts the agent if this node holds its office.
func (s *Sessions) Restart(ctx context.Context, spec engine.SessionSpec) error {
	if err := s.prepare(ctx, spec); err != nil {
		return err
	}
	return s.Sessions.Restart(ctx, spec)
}

// Send types into the agent if this node holds its office. A Send waiting
// for the agent to be ready is cancelled when the node loses the office.
func (s *Sessions) Send(ctx context.Context, officeID, agentID, text string) error {
	return s.SendSince(ctx, officeID, agentID, text, time.Time{})
}

// SendSince is Send for a text typed before, at since (engine.SendSince):
// the agent's record is checked before it is typed again.
func (s *Sessions) SendSince(ctx context.Context, officeID, agentID, text string, since time.Time) error {
	if err := s.owned(officeID); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := s.Node.Lost(officeID)
	go func() {
		select {
		case <-lost:
			cancel()
		case <-ctx.Done():
		}
	}()
	if ss, ok := s.Sessions.(engine.SendSince); ok {
		return ss.SendSince(ctx, officeID, agentID, text, since)
	}
	return s.Sessions.Send(ctx, officeID, agentID, text)
}

// prepare checks ownership and, for a Claude Code agent, restores its
// transcript (on a resume) and follows it.
func (s *Sessions) prepare(ctx context.Context, spec engine.SessionSpec) error {
	if err := s.owned(spec.OfficeID); err != nil {
		return err
	}
	if err := s.folder(spec); err != nil {
		return err
	}
	kind := spec.Launch.Kind
	s.sayNotCarried(spec)
	if (kind != "" && kind != session.KindClaude) || spec.ConversationID == "" || s.StateDir == "" {
		return nil
	}
	if _, home := spec.Launch.Env["HOME"]; home {
		return nil // a HOME of the operator's choosing: its files are the operator's
	}
	cfg := agents.ClaudeConfigDir(s.StateDir, spec.OfficeID, spec.AgentID)
	path := session.TranscriptPath(cfg, workDir(spec.Dir), spec.ConversationID)
	if spec.Resume {
		restored, err := s.Transcripts.Restore(ctx, spec.AgentID, spec.ConversationID, path)
		if err != nil {
			return office.Errorf(office.EUNAVAILABLE, "restore the conversation of agent %s: %v", spec.AgentID, err)
		}
		if restored {
			s.Node.log.Info("conversation restored from the database", "office", spec.OfficeID, "agent", spec.AgentID, "conversation", spec.ConversationID)
		}
	}
	s.Transcripts.Follow(spec.OfficeID, spec.AgentID, spec.ConversationID, path)
	return nil
}

// sayNotCarried logs, the first time this node starts an agent of a kind
// whose conversation stays in files on the machine that ran it (Codex,
// Gemini CLI, Qwen Code: only Claude Code's is kept in the database), that
// a conversation begun on another node is not resumed here.
func (s *Sessions) sayNotCarried(spec engine.SessionSpec) {
	switch spec.Launch.Kind {
	case session.KindCodex, session.KindGemini, session.KindQwen:
	default:
		return
	}
	if !spec.Resume {
		return
	}
	s.mu.Lock()
	if s.started == nil {
		s.started = map[string]bool{}
	}
	first := !s.started[spec.AgentID]
	s.started[spec.AgentID] = true
	s.mu.Unlock()
	if first {
		s.Node.log.Warn("this kind's conversation is not carried between nodes: unless this node ran the agent before, it starts a new conversation here and its tasks are typed again",
			"office", spec.OfficeID, "agent", spec.AgentID, "kind", spec.Launch.Kind, "conversation", spec.ConversationID)
	}
}

// workDir returns dir as Claude Code sees it (its cwd: absolute, links
// resolved), which names its project directory. The session creates a
// missing dir; here it is made first so that it can be resolved.
func workDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	_ = os.MkdirAll(abs, 0o755)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// folder refuses to resume an agent whose working folder, one the operator
// named (launch.dir), is missing on this node: the agent ran before, so the
// folder is on another machine's disk, or the shared volume is not mounted
// here. Starting it in a new empty folder would lose its work silently; the
// agent's session is marked stopped with the reason instead. A first start
// (no conversation yet) creates the folder as on a single server.
func (s *Sessions) folder(spec engine.SessionSpec) error {
	if !spec.Resume || spec.Launch.Dir == "" {
		return nil
	}
	_, err := os.Stat(spec.Dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	msg := fmt.Sprintf("working folder %s is missing on node %s: mount the shared volume (or clone the agent's repository) at that path, then start the agent", spec.Dir, s.Node.ID())
	if s.Report != nil {
		s.Report(session.Key{OfficeID: spec.OfficeID, AgentID: spec.AgentID}, office.SessionStopped, session.Info{Detail: msg})
	}
	return office.Errorf(office.EUNAVAILABLE, "%s", msg)
}
