package reconnect

import (
	"slices"
	"testing"
	"time"
)

// TestNodesSpreadTheirRetries: two nodes that lost the same server at the
// same instant (two Backoffs of the same settings) do not wait the same
// delays; each delay stays within ±50 % of its doubling step, capped at
// max; Reset starts again from initial.
func TestNodesSpreadTheirRetries(t *testing.T) {
	const initial, max = 50 * time.Millisecond, 5 * time.Second
	a, b := Backoff(initial, max), Backoff(initial, max)
	var da, db []time.Duration
	step := initial
	for i := 0; i < 12; i++ {
		x, y := a.NextBackOff(), b.NextBackOff()
		for _, d := range []time.Duration{x, y} {
			if d < step/2 || d > step+step/2+1 {
				t.Errorf("retry %d waits %v; want within ±50%% of %v", i+1, d, step)
			}
		}
		da, db = append(da, x), append(db, y)
		step = min(2*step, max)
	}
	same := 0
	for i := range da {
		if da[i] == db[i] {
			same++
		}
	}
	if same > 1 || slices.Equal(da, db) {
		t.Errorf("two nodes picked the same delay %d times of %d:\n%v\n%v", same, len(da), da, db)
	}
	a.Reset()
	if d := a.NextBackOff(); d < initial/2 || d > initial+initial/2+1 {
		t.Errorf("after Reset the first retry waits %v; want within ±50%% of %v", d, initial)
	}
}
