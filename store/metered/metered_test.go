package metered_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/store/metered"
)

// TestEveryMethodMeasured: metered.go declares a method for every method
// of office.Store that returns an error (Close aside), so none is answered
// unmeasured by the embedded store.
func TestEveryMethodMeasured(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "metered.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil {
			declared[fn.Name.Name] = true
		}
	}
	st := reflect.TypeFor[office.Store]()
	errType := reflect.TypeFor[error]()
	for i := range st.NumMethod() {
		m := st.Method(i)
		if m.Name == "Close" || m.Type.NumOut() == 0 || m.Type.Out(m.Type.NumOut()-1) != errType {
			continue
		}
		if !declared[m.Name] {
			t.Errorf("office.Store.%s is not measured: add it to metered.go", m.Name)
		}
	}
}

// fakeStore answers GetAgent with a not-found error after a pause.
type fakeStore struct{ office.Store }

func (fakeStore) GetAgent(context.Context, string) (office.Agent, error) {
	time.Sleep(2 * time.Millisecond)
	return office.Agent{}, office.Errorf(office.ENOTFOUND, "no agent")
}

func (fakeStore) Ping(context.Context) error { return nil }

// TestObserves: each request reports its method, duration and error.
func TestObserves(t *testing.T) {
	type call struct {
		op  string
		d   time.Duration
		err error
	}
	var calls []call
	s := metered.New(fakeStore{}, func(op string, d time.Duration, err error) { calls = append(calls, call{op, d, err}) })
	if _, err := s.GetAgent(context.Background(), "x"); !office.IsNotFound(err) {
		t.Fatalf("err %v", err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].op != "GetAgent" || calls[0].d < 2*time.Millisecond || !office.IsNotFound(calls[0].err) ||
		calls[1].op != "Ping" || !errors.Is(calls[1].err, nil) {
		t.Fatalf("observed %+v", calls)
	}
}

// BenchmarkMeasured is the cost a measured request adds: a Ping of a store
// that answers at once, plain and through New with the server's metrics.
func BenchmarkMeasured(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		s    office.Store
	}{
		{"plain", fakeStore{}},
		{"measured", metered.New(fakeStore{}, server.NewMetrics().ObserveStore)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_ = bc.s.Ping(ctx)
			}
		})
	}
}
