package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/office"
)

// answerQuestions and answerResponses are the shared table of answer
// normalisation: every response is put to every question, through
// validAnswer (the definition) and through the migrations'
// public.office_normalize_answer (what answer_question runs when a member
// answers over PostgREST), and the two must agree: the same text, or both
// refuse. answerWant pins some results, so agreeing on a wrong answer fails
// too.
var answerQuestions = map[string]office.Question{
	"selection":                  {QuestionType: office.QuestionSelection, Options: []string{"Dark mode", "Notifications", " Spaced "}},
	"selection without options":  {QuestionType: office.QuestionSelection},
	"required selection":         {QuestionType: office.QuestionSelection, Options: []string{"a", "B"}, Required: true},
	"confirmation":               {QuestionType: office.QuestionConfirmation},
	"confirmation with options":  {QuestionType: office.QuestionConfirmation, Options: []string{"Yes", "No, use staging"}},
	"text":                       {QuestionType: office.QuestionText},
	"required text":              {QuestionType: office.QuestionText, Required: true},
	"selection of unicode words": {QuestionType: office.QuestionSelection, Options: []string{"Ärger", "기획", "ǅemal"}},
}

var answerResponses = []string{
	"", " ", "\u3000", "yes", "Y", " y ", "TRUE", "네", "예", "no", "N", "false", "아니오", "아니요", "maybe",
	"Dark mode", " dark MODE\u3000", "NOTIFICATIONS", "spaced", "Purple", "b", "A ",
	"No, use staging", "no, use staging ", "YES",
	"ärger", "ÄRGER", "기획", "ǆemal", "ǄEMAL", "  hi  ", "\thi\n", "\u00a0x\u2003",
}

// answerWant pins the normalised answer of some (question, response)
// pairs; "!" is a refusal.
var answerWant = map[[2]string]string{
	{"selection", " dark MODE\u3000"}:                 "Dark mode",
	{"selection", "spaced"}:                           " Spaced ",
	{"selection", "Purple"}:                           "!",
	{"selection without options", "  hi  "}:           "hi",
	{"required selection", ""}:                        "!",
	{"confirmation", "네"}:                             "yes",
	{"confirmation", " y "}:                           "yes",
	{"confirmation", "false"}:                         "no",
	{"confirmation", "maybe"}:                         "!",
	{"confirmation with options", "no, use staging "}: "No, use staging",
	{"text", "\u3000"}:                                "",
	{"required text", " "}:                            "!",
	{"required text", "\u00a0x\u2003"}:                "x",
	{"selection of unicode words", "ÄRGER"}:           "Ärger",
	{"selection of unicode words", "ǄEMAL"}:           "ǅemal",
}

// TestAnswerNormalisationSQLAgrees runs the shared table through validAnswer
// and public.office_normalize_answer on a database migrated as production
// is; a divergence between the two forms fails.
func TestAnswerNormalisationSQLAgrees(t *testing.T) {
	url := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := supabasetest.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyURL(ctx, url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pinned := 0
	for name, q := range answerQuestions {
		row, err := json.Marshal(map[string]any{"question_type": q.QuestionType, "options": append([]string{}, q.Options...), "required": q.Required})
		if err != nil {
			t.Fatal(err)
		}
		for _, resp := range answerResponses {
			q.Response = resp
			goAns, goErr := validAnswer(q)
			var sqlAns string
			sqlErr := conn.QueryRow(ctx, `select public.office_normalize_answer(jsonb_populate_record(null::public.user_questions, $1::jsonb), $2)`, string(row), resp).Scan(&sqlAns)
			var pgErr *pgconn.PgError
			if sqlErr != nil && (!errors.As(sqlErr, &pgErr) || pgErr.Code != "22023") {
				t.Fatalf("%s, %q: SQL: %v", name, resp, sqlErr)
			}
			if goErr != nil && office.ErrorCode(goErr) != office.EINVALID {
				t.Fatalf("%s, %q: Go: %v", name, resp, goErr)
			}
			got := func(ans string, err error) string {
				if err != nil {
					return "!"
				}
				return ans
			}
			g, s := got(goAns, goErr), got(sqlAns, sqlErr)
			if g != s {
				t.Errorf("%s, answer %q: validAnswer %q (%v), office_normalize_answer %q (%v); want the same", name, resp, g, goErr, s, sqlErr)
			}
			if want, ok := answerWant[[2]string{name, resp}]; ok {
				pinned++
				if g != want {
					t.Errorf("%s, answer %q: %q; want %q", name, resp, g, want)
				}
			}
		}
	}
	if pinned != len(answerWant) {
		t.Errorf("%d of the %d pinned cases are in the table", pinned, len(answerWant))
	}
}
