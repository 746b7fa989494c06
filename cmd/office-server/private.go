package main

import (
	"fmt"
	"os"
)

// privateFiles makes the store's files readable by the server's user only
// (issue 12, break 10: an agent of another user must not read office.db).
// The database file is created 0600 if missing; SQLite creates its -wal and
// -shm files with the database file's mode (store/sqlite journalModes), and existing ones are fixed.
func privateFiles(db string, more ...string) error {
	f, err := os.OpenFile(db, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", db, err)
	}
	f.Close()
	for _, p := range append([]string{db}, more...) {
		if err := os.Chmod(p, 0o600); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}
