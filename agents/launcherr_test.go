package agents

import (
	"fmt"
	"strings"
	"testing"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// TestLaunchErrNoPTY: no pseudo-terminal left is the machine's state, not
// a bad request: unavailable, with the reason.
func TestLaunchErrNoPTY(t *testing.T) {
	err := launchErr(fmt.Errorf("start session o/a: launch claude: %w", session.ErrNoPTY))
	if office.ErrorCode(err) != office.EUNAVAILABLE || !strings.Contains(err.Error(), "no pseudo-terminal left") {
		t.Errorf("launchErr: %v (code %s), want EUNAVAILABLE", err, office.ErrorCode(err))
	}
}

func TestLaunchErrNoProcess(t *testing.T) {
	err := launchErr(fmt.Errorf("start session o/a: %w", session.ErrNoProcess))
	if office.ErrorCode(err) != office.EUNAVAILABLE {
		t.Errorf("launchErr: %v (code %s), want EUNAVAILABLE", err, office.ErrorCode(err))
	}
}
