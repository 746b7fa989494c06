// Package agentstest wires a router and its sessions for tests exactly as
// the server does (agents.New), so tests never keep a wiring of their own.
package agentstest

import (
	"os"
	"path/filepath"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/session"
)

// NewManaged returns the router and session manager agents.New builds, with
// Claude Code agents' configuration under cfg.DataDir/claude (or a shared
// temporary directory when cfg has no DataDir).
func NewManaged(cfg engine.Config, opts session.Options) (*engine.Router, *session.Manager, error) {
	state := filepath.Join(cfg.DataDir, "claude")
	if cfg.DataDir == "" {
		state = filepath.Join(os.TempDir(), "office-test-claude")
	}
	r, sess, err := agents.New(cfg, agents.Options{StateDir: state}, opts)
	if err != nil {
		return nil, nil, err
	}
	return r, sess.Manager(), nil
}
