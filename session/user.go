package session

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runAs prepares cmd to run as spec.User, if set (issue 12, break 10: the way to
// isolate agents from each other and from the server's files is an OS user
// per agent). The server must be root or hold CAP_SETUID and CAP_SETGID;
// the agent's HOME and working directory are given to that user (CAP_CHOWN)
// and the directories above them made traversable (see traversable).
// Claude Code agents keep their state in the server's directories and are
// refused for now. It returns the credential to run the agent with (nil:
// the server's); keep applies it.
func runAs(cmd *exec.Cmd, spec Spec) (*syscall.Credential, error) {
	if spec.User == "" {
		return nil, nil
	}
	if spec.Kind == KindClaude {
		return nil, fmt.Errorf("user %q: running as another user is supported for command agents only; wrap claude in a kind: command launch spec (sudo -u, systemd-run) instead", spec.User)
	}
	u, err := user.Lookup(spec.User)
	if err != nil {
		if _, numErr := strconv.Atoi(spec.User); numErr != nil {
			return nil, fmt.Errorf("user %q: %w", spec.User, err)
		}
		if u, err = user.LookupId(spec.User); err != nil {
			return nil, fmt.Errorf("user %q: %w", spec.User, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q: uid %q or gid %q is not a number", spec.User, u.Uid, u.Gid)
	}
	if ok, why := canSetUser(); !ok {
		return nil, fmt.Errorf("user %q: the server cannot run agents as another user: %s (run it as root, or give it CAP_SETUID, CAP_SETGID and CAP_CHOWN)", spec.User, why)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	for _, d := range []string{spec.Home, spec.Dir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("user %q: %w", spec.User, err)
		}
		if err := os.Chown(d, int(uid), int(gid)); err != nil {
			return nil, fmt.Errorf("user %q: give it %s: %w", spec.User, d, err)
		}
		if err := traversable(filepath.Dir(d)); err != nil {
			return nil, fmt.Errorf("user %q: %w", spec.User, err)
		}
	}
	for i, kv := range cmd.Env {
		switch {
		case strings.HasPrefix(kv, "USER="):
			cmd.Env[i] = "USER=" + u.Username
		case strings.HasPrefix(kv, "LOGNAME="):
			cmd.Env[i] = "LOGNAME=" + u.Username
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, nil
}

// traversable lets every user pass through dir and every directory above
// it (o+x, as in 0711: no listing, no reading): the agent's user must reach
// its own HOME and workspace inside the server's data dir, and nothing
// else there (the server's files stay 0600).
func traversable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("let the agent's user reach %s: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// canSetUser reports whether this process may change the user of its
// children: root, or CAP_SETUID and CAP_SETGID in its effective set.
func canSetUser() (bool, string) {
	if os.Geteuid() == 0 {
		return true, ""
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, "it is not root"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			const setgid, setuid = 1 << 6, 1 << 7
			if err == nil && caps&setuid != 0 && caps&setgid != 0 {
				return true, ""
			}
		}
	}
	return false, fmt.Sprintf("it runs as uid %d without CAP_SETUID and CAP_SETGID", os.Geteuid())
}
