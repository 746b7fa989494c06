package session

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// A driver is one kind of agent's strategy for its session: how its process
// is launched, where its words come from (a transcript, or its screen),
// when it is ready and when its turn is over, how a typed text is
// acknowledged, and how a restart resumes it. Everything else — the
// process, the PTY, crash restarts, the send queue, the viewers — is the
// Session's and the same for every kind.
//
// A driver lives as long as its session runs that kind: across restarts of
// the process; a restart with a spec of another kind gets a new driver.
// Methods marked "locked" are called with Session.mu held; the others from
// the session's worker (or from Start, before the worker runs) without it.
type driver interface {
	// launch prepares a start of the process (files it needs) and returns
	// its arguments and environment.
	launch(spec Spec) (args, env []string, err error)
	// started resets the driver for the process that was just started
	// with spec, and fills in the kind's part of info. Locked.
	started(spec Spec, info *Info)
	// output takes what the process wrote to its terminal, in order.
	// Locked; called from the PTY reader, so it must not block.
	output(p []byte)
	// screen returns the visible rows of the terminal. Locked.
	screen() []string
	// resize follows a change of the terminal size. Locked.
	resize(cols, rows int)
	// step reads the agent's new words and decides its status. It returns
	// the texts to dispatch and the status report to make after them.
	step(now time.Time, st Status) ([]Text, func())
	// flush returns the words still on screen when the process ended.
	// Locked.
	flush() []Text
	// typed notes that the session typed text into the agent. Locked.
	typed(text string)
	// keys notes keystrokes a person typed; it reports whether they
	// entered a line (the agent is then busy). Locked.
	keys(p []byte) bool
	// received reports whether the agent acknowledged the text a typed:
	// done with a nil error when it did, done with an error when it never
	// will (it is typed again), not done while it may still.
	received(now time.Time, a *pendingAck) (done bool, err error)
	// resume adjusts spec for a restart of the process; asked is the spec
	// the restart was asked with (nil: a restart after a crash). Locked.
	resume(spec *Spec, asked *Spec)
	// close releases what the driver holds outside memory.
	close()
}

// kind is an entry of the registry of kinds.
type kind struct {
	// check fills in the kind's defaults in spec and reports what it
	// cannot run.
	check func(spec *Spec) error
	// driver makes the kind's driver for s.
	driver func(s *Session) driver
}

// kinds is the registry of agent kinds: each has its strategy in its own
// file (claude.go, command.go, builtin.go, codex.go, gemini.go, qwen.go).
// A new kind is a new file and a line here.
var kinds = map[string]kind{
	KindClaude:  {check: checkClaude, driver: newClaudeDriver},
	KindCommand: {check: checkCommand, driver: newCommandDriver},
	KindBuiltin: {check: checkBuiltin, driver: newBuiltinDriver},
	KindCodex:   {check: checkCodex, driver: newCodexDriver},
	KindGemini:  {check: checkGemini, driver: newGeminiDriver},
	KindQwen:    {check: checkQwen, driver: newQwenDriver},
}

// Kinds returns the names of the agent kinds a session runs, sorted.
func Kinds() []string { return slices.Sorted(maps.Keys(kinds)) }

// Check returns spec with its defaults filled in (the empty kind is
// KindClaude), or what is wrong with it: an unknown kind, a field the kind
// needs, a prompt pattern that is not a regular expression. Start and
// Restart check their spec.
func Check(spec Spec) (Spec, error) {
	if spec.Kind == "" {
		spec.Kind = KindClaude
	}
	k, ok := kinds[spec.Kind]
	if !ok {
		return spec, fmt.Errorf("unknown kind %q (known: %s)", spec.Kind, strings.Join(Kinds(), ", "))
	}
	if err := k.check(&spec); err != nil {
		return spec, err
	}
	if spec.Cols <= 0 {
		spec.Cols = 200
	}
	if spec.Rows <= 0 {
		spec.Rows = 50
	}
	if spec.Dir != "" {
		d, err := absDir(spec.Dir)
		if err != nil {
			return spec, err
		}
		spec.Dir = d
	}
	return spec, nil
}
