package supabase

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// interval is a PostgreSQL interval column as PostgREST carries it: text.
// It is written as "<n> microseconds", which the interval input function
// accepts under every IntervalStyle, and read in the default output style
// (IntervalStyle = postgres, Supabase's setting): "[N day[s]] [-]HH:MM:SS[.ffffff]".
// Months and years have no fixed length and are refused.
type interval time.Duration

func (i interval) MarshalJSON() ([]byte, error) {
	return json.Marshal(fmt.Sprintf("%d microseconds", time.Duration(i).Microseconds()))
}

func (i *interval) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*i = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("interval: %w", err)
	}
	d, err := parseInterval(s)
	if err != nil {
		return err
	}
	*i = interval(d)
	return nil
}

func parseInterval(s string) (time.Duration, error) {
	var total time.Duration
	fields := strings.Fields(s)
	for len(fields) > 0 {
		f := fields[0]
		if strings.Contains(f, ":") {
			d, err := parseClock(f)
			if err != nil {
				return 0, fmt.Errorf("interval %q: %w", s, err)
			}
			total += d
			fields = fields[1:]
			continue
		}
		if len(fields) < 2 {
			return 0, fmt.Errorf("interval %q: dangling %q", s, f)
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("interval %q: %w", s, err)
		}
		switch strings.TrimSuffix(fields[1], "s") {
		case "day":
			total += time.Duration(n) * 24 * time.Hour
		default:
			return 0, fmt.Errorf("interval %q: unit %q has no fixed length", s, fields[1])
		}
		fields = fields[2:]
	}
	return total, nil
}

// parseClock parses [-]HH:MM:SS[.ffffff].
func parseClock(s string) (time.Duration, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, fmt.Errorf("bad clock %q", s)
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	m, err2 := strconv.ParseInt(parts[1], 10, 64)
	sec, err3 := strconv.ParseFloat(parts[2], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, fmt.Errorf("bad clock %q", s)
	}
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec*1e6+0.5)*time.Microsecond
	if neg {
		d = -d
	}
	return d, nil
}
