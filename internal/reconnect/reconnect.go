// Package reconnect is the office's one reconnect backoff: every loop that
// waits before trying a database, a change feed or a Realtime socket again
// draws its delays from Backoff, so the growth and the jitter are the same
// everywhere and nodes that lost the same server spread their retries.
package reconnect

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff returns delays that start near initial and double up to max, each
// drawn at random from ±50 % of the step (github.com/cenkalti/backoff/v5
// ExponentialBackOff, RandomizationFactor 0.5): after a database failover
// the nodes reconnect spread over the window instead of at one instant.
// Reset starts again from initial (after a connection that held). Not safe
// for concurrent use: one per loop.
func Backoff(initial, max time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     initial,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         max,
	}
}
