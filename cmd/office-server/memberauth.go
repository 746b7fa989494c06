package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/office-server/office-server/supabase"
)

// checkSupabaseURL checks SUPABASE_URL beside the store's settings.
// SUPABASE_URL is a project's URL (https://<project-ref>.supabase.co, no
// path: the server appends /rest/v1, /realtime/v1 and /auth/v1). Alone it
// is the store, reached with the project's API key; with DATABASE_URL the
// store is PostgreSQL and SUPABASE_URL only names the project whose Auth
// signs members' tokens (its JWKS and issuer, memberAuth), which takes no
// key. An API key set there as well is refused: it would say the REST
// store was meant, and the message says which variable to unset for each.
func checkSupabaseURL(c serveConfig, getenv func(string) string) error {
	if c.SupabaseURL == "" {
		return nil
	}
	u, err := url.Parse(c.SupabaseURL)
	switch {
	case err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("SUPABASE_URL is not a project URL: want https://<project-ref>.supabase.co (Project Settings → Data API)")
	case strings.Trim(u.Path, "/") != "":
		return fmt.Errorf("SUPABASE_URL has the path %q: want the project URL alone, https://<project-ref>.supabase.co", u.Path)
	}
	if c.DatabaseURL == "" {
		return nil
	}
	for _, k := range []string{supabase.EnvSecretKey, supabase.EnvServiceRoleKey} {
		if getenv(k) != "" {
			return fmt.Errorf("DATABASE_URL, SUPABASE_URL and %[1]s are all set: with DATABASE_URL the store is PostgreSQL and SUPABASE_URL only names the project whose Auth signs members' tokens, which needs no API key. "+
				"To run on PostgreSQL (several servers, leased offices), unset %[1]s; to run on Supabase's REST API (one server), unset DATABASE_URL", k)
		}
	}
	return nil
}

// memberAuth is how the server verifies members' access tokens: against
// the JWKS and issuer of SUPABASE_URL whichever the store (with
// DATABASE_URL too), and with SUPABASE_JWT_SECRET as the legacy HS256
// path. It logs which, and, on PostgreSQL, what to set when members'
// tokens of a project created today cannot be verified.
func memberAuth(c serveConfig, log *slog.Logger) supabase.MemberAuth {
	a := supabase.MemberAuth{ProjectURL: c.SupabaseURL, JWTSecret: c.JWTSecret, AllowAnonymous: c.AllowAnonymousMembers, Logger: log}
	issuer := strings.TrimRight(c.SupabaseURL, "/") + "/auth/v1"
	switch {
	case c.SupabaseURL != "":
		log.Info("members' tokens: verified with the project's signing keys", "jwks", issuer+"/.well-known/jwks.json", "iss", issuer,
			"legacy_hs256", c.JWTSecret != "", "anonymous_members", c.AllowAnonymousMembers)
	case c.storeKind() == "postgres" && c.JWTSecret != "":
		log.Warn("members' tokens: only HS256 with " + supabase.EnvJWTSecret + " (the legacy path), and their issuer is not checked: set SUPABASE_URL to the Supabase project's URL to verify the tokens it signs with its signing keys (ES256, RS256)")
	case c.storeKind() == "postgres":
		log.Info("member endpoints off: set SUPABASE_URL to the Supabase project whose Auth signs members' tokens (docs/deploy-supabase.md)")
	}
	return a
}
