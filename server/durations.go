package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/office-server/office-server/office"
)

// Duration is a time.Duration as the API writes and reads it: a string
// such as "30m" or "1h30m0s" (time.ParseDuration), never nanoseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string ("5m0s").
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string; a number is refused with what to
// write instead (it would be ambiguous: seconds or nanoseconds?).
func (d *Duration) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("write a duration as a string such as \"30s\", \"10m\" or \"1h30m\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration: write it like \"30s\", \"10m\" or \"1h30m\"", s)
	}
	*d = Duration(v)
	return nil
}

// officeJSON is an office as the API shows and takes it: question_ttl is
// a duration string.
type officeJSON struct {
	office.Office
	QuestionTTL Duration `json:"question_ttl"`
}

func officeOut(o office.Office) officeJSON {
	return officeJSON{Office: o, QuestionTTL: Duration(o.QuestionTTL)}
}

func (oj officeJSON) office() office.Office {
	out := oj.Office
	out.QuestionTTL = time.Duration(oj.QuestionTTL)
	return out
}

// policyJSON is a permission policy with its timeout as a duration string.
type policyJSON struct {
	office.PermissionPolicy
	Timeout Duration `json:"timeout,omitempty"`
}

// launchJSON is a launch spec with its permission policy's timeout and
// its hibernate_after as duration strings.
type launchJSON struct {
	office.LaunchSpec
	Permissions    *policyJSON `json:"permissions,omitempty"`
	HibernateAfter Duration    `json:"hibernate_after,omitempty"`
}

func launchOut(l office.LaunchSpec) launchJSON {
	out := launchJSON{LaunchSpec: l, HibernateAfter: Duration(l.HibernateAfter)}
	if l.Permissions != nil {
		out.Permissions = &policyJSON{PermissionPolicy: *l.Permissions, Timeout: Duration(l.Permissions.Timeout)}
	}
	return out
}

func (l launchJSON) spec() office.LaunchSpec {
	out := l.LaunchSpec
	out.Permissions = nil
	out.HibernateAfter = time.Duration(l.HibernateAfter)
	if l.Permissions != nil {
		p := l.Permissions.PermissionPolicy
		p.Timeout = time.Duration(l.Permissions.Timeout)
		out.Permissions = &p
	}
	return out
}

// agentJSON is an agent as the API takes it (launch durations as strings).
type agentJSON struct {
	office.Agent
	Launch launchJSON `json:"launch"`
}

func (a agentJSON) agent() office.Agent {
	out := a.Agent
	out.Launch = a.Launch.spec()
	return out
}
