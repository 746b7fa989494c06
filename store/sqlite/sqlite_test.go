package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/sqlite"
	"github.com/office-server/office-server/store/storetest"
)

func open(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "office.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) (office.Store, office.ChangeFeed) {
			s := open(t)
			return s, s
		},
	})
}
