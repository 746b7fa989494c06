package server

import "runtime/debug"

// Build is what the go command recorded in the binary about its build
// (runtime/debug.ReadBuildInfo): the module version, the VCS commit and
// time, whether the tree had changes, the Go version. office_build_info
// and `office-server --version` show it.
type Build struct {
	Version, Revision, Time, GoVersion string
	Modified                           bool
}

// ReadBuild returns the running binary's Build; fields it cannot know are
// empty.
func ReadBuild() Build {
	var b Build
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version, b.GoVersion = bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}
