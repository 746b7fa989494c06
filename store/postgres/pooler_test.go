package postgres_test

import (
	"strings"
	"testing"

	"github.com/office-server/office-server/store/postgres"
)

func TestCheckSessionURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // "" when accepted
	}{
		// Supabase's session pooler and direct connection.
		{"postgres://postgres.abcdefghijklmnopqrst:pw@aws-0-eu-central-1.pooler.supabase.com:5432/postgres", ""},
		{"postgresql://postgres:pw@db.abcdefghijklmnopqrst.supabase.co:5432/postgres?sslmode=require", ""},
		{"postgres://office:office@127.0.0.1/office?sslmode=disable", ""},
		{"host=127.0.0.1 port=5432 user=office dbname=office", ""},
		{"postgres://u:p@h:5432/db?pgbouncer=false", ""},
		// The transaction pooler.
		{"postgres://postgres.abcdefghijklmnopqrst:pw@aws-0-eu-central-1.pooler.supabase.com:6543/postgres", "aws-0-eu-central-1.pooler.supabase.com:6543"},
		{"postgres://postgres:pw@db.abcdefghijklmnopqrst.supabase.co:6543/postgres", ":6543"},
		{"postgres://u:p@h:5432/db?pgbouncer=true", "pgbouncer=true"},
		{"host=h1,h2 port=5432,6543 user=u dbname=d", "h2:6543"},
		// Not a URL at all.
		{"postgres://u:pw@h:notaport/db", "database URL"},
	} {
		err := postgres.CheckSessionURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want accepted", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error naming %q", tc.url, err, tc.want)
		case tc.want != "" && tc.want != "database URL" && !strings.Contains(err.Error(), "Session pooler"):
			t.Errorf("%s: %v; want it to say to use the session pooler", tc.url, err)
		}
		if err != nil && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("%s: the error shows the password: %v", tc.url, err)
		}
	}
}
