package engine_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
)

// TestSecretDependenciesNeverInClearPostgres: on PostgreSQL without a
// secrets key, an env_variable value is refused as an api_key value is
// (EUNAVAILABLE, nothing written: the row stays pending with no value); a
// service URL, not a secret, is stored. With a key, the bytes in the table
// do not hold the value.
func TestSecretDependenciesNeverInClearPostgres(t *testing.T) {
	url := pgDB(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	router := func(key []byte) *engine.Router {
		r, err := engine.New(engine.Config{Store: st, Sessions: nopSessions{}, SecretsKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	noKey := router(nil)
	_, agents, err := noKey.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "secrets"}, Agents: []office.Agent{{Name: "dev"}}})
	if err != nil {
		t.Fatal(err)
	}
	dev := agents[0]
	request := func(typ, name string) office.DependencyRequest {
		d, err := st.CreateDependency(ctx, office.DependencyRequest{OfficeID: dev.OfficeID, AgentID: dev.ID, Type: typ, Name: name,
			Status: office.DependencyPending, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	stored := func(id string) (status string, value []byte) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, `select status, value from dependency_requests where id = $1`, id).Scan(&status, &value); err != nil {
			t.Fatal(err)
		}
		return status, value
	}

	const secret = "postgres://app:hunter2-hunter2@db.internal/prod"
	for typ, value := range map[string]string{"env_variable": secret, "api_key": "sk-hunter2-hunter2-0123456789"} {
		d := request(typ, "SECRET_"+typ)
		_, err := noKey.ProvideDependency(ctx, d.ID, value)
		if office.ErrorCode(err) != office.EUNAVAILABLE {
			t.Errorf("%s without a secrets key: %v, want EUNAVAILABLE", typ, err)
		}
		if status, value := stored(d.ID); status != office.DependencyPending || value != nil {
			t.Errorf("%s without a secrets key: stored status %s value %q; want pending, no value", typ, status, value)
		}
	}

	svc := request("service", "API_URL")
	if _, err := noKey.ProvideDependency(ctx, svc.ID, "https://api.example.com"); err != nil {
		t.Errorf("service without a secrets key: %v, want stored (not a secret)", err)
	}

	withKey := router(bytes.Repeat([]byte{9}, 32))
	d := request("env_variable", "DATABASE_URL")
	if _, err := withKey.ProvideDependency(ctx, d.ID, secret); err != nil {
		t.Fatalf("env_variable with a key: %v", err)
	}
	if status, value := stored(d.ID); status != office.DependencyProvided || len(value) == 0 || bytes.Contains(value, []byte("hunter2")) {
		t.Errorf("env_variable with a key: stored status %s value %q; want provided and encrypted", status, value)
	}
}
