// Go's own label costs, for the figures beside the engine's in the crate README:
//
//	cd benches/go && go test -bench . -benchmem
//
// BenchmarkDo: pprof.Do with a prebuilt LabelSet around a trivial function (what a Go handler pays per
// request once its labels are built). BenchmarkLabelsAndDo: building the two-pair set each time too.
package labelsbench

import (
	"context"
	"runtime/pprof"
	"testing"
)

var sink int

func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	set := pprof.Labels("tenant", "acme", "route", "/orders")
	for i := 0; i < b.N; i++ {
		pprof.Do(ctx, set, func(context.Context) { sink++ })
	}
}

func BenchmarkLabelsAndDo(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		pprof.Do(ctx, pprof.Labels("tenant", "acme", "route", "/orders"), func(context.Context) { sink++ })
	}
}
