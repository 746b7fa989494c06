package sqlite

import (
	"encoding/json"
	"fmt"
	"time"
)

// tsVal scans a NOT NULL timestamp column.
type tsVal struct{ t *time.Time }

func (v tsVal) Scan(src any) error {
	s, err := text(src)
	if err != nil {
		return err
	}
	t, err := parseTS(s)
	if err != nil {
		return err
	}
	*v.t = t
	return nil
}

// tsPtr scans a nullable timestamp column into a *time.Time.
type tsPtr struct{ t **time.Time }

func (v tsPtr) Scan(src any) error {
	if src == nil {
		*v.t = nil
		return nil
	}
	s, err := text(src)
	if err != nil {
		return err
	}
	t, err := parseTS(s)
	if err != nil {
		return err
	}
	*v.t = &t
	return nil
}

// jsonVal scans a JSON text column into v; NULL leaves v as it is.
type jsonVal struct{ v any }

func (j jsonVal) Scan(src any) error {
	if src == nil {
		return nil
	}
	s, err := text(src)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(s), j.v); err != nil {
		return fmt.Errorf("decode JSON column: %w", err)
	}
	return nil
}

// rawJSON scans a nullable JSON text column into a json.RawMessage.
type rawJSON struct{ v *json.RawMessage }

func (j rawJSON) Scan(src any) error {
	if src == nil {
		*j.v = nil
		return nil
	}
	s, err := text(src)
	if err != nil {
		return err
	}
	*j.v = json.RawMessage(s)
	return nil
}

// intPtr scans a nullable integer column into a *int.
type intPtr struct{ p **int }

func (v intPtr) Scan(src any) error {
	switch x := src.(type) {
	case nil:
		*v.p = nil
	case int64:
		n := int(x)
		*v.p = &n
	default:
		return fmt.Errorf("want an integer, got %T", src)
	}
	return nil
}

func text(src any) (string, error) {
	switch x := src.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case time.Time: // a driver that converts by itself
		return ts(x), nil
	default:
		return "", fmt.Errorf("want text, got %T", src)
	}
}

// jsonText encodes v for a JSON text column; nil slices become [] and nil
// maps {} as the Postgres defaults are.
func jsonText(v any, empty string) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if string(b) == "null" {
		return empty, nil
	}
	return string(b), nil
}
