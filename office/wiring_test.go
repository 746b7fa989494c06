package office_test

import (
	"os"
	"path/filepath"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// newManaged wires a router and its sessions as the server does
// (agents.New), with Claude Code agents' configuration under the data dir.
func newManaged(cfg office.Config, opts session.Options) (*office.Router, *session.Manager, error) {
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
