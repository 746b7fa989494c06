package sqlite_test

import (
	"testing"

	"github.com/office-server/office-server/store/storetest"
)

// BenchmarkStore: go test -run '^$' -bench . -benchtime 2000x ./store/sqlite/
func BenchmarkStore(b *testing.B) {
	s := open(b)
	storetest.Bench(b, s, s)
}
