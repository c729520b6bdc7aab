// checkprof parses a pprof file with google/pprof's profile package, runs CheckValid and prints the
// profile's shape as JSON. Built at test time (GO111MODULE=off, GOPATH=/usr/share/gocode); never committed
// as a binary.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/google/pprof/profile"
)

type mapping struct {
	File         string `json:"file"`
	BuildID      string `json:"build_id"`
	HasFunctions bool   `json:"has_functions"`
	HasFilenames bool   `json:"has_filenames"`
}

type shape struct {
	SampleTypes []string   `json:"sample_types"`
	PeriodType  string     `json:"period_type"`
	Period      int64      `json:"period"`
	Default     string     `json:"default_sample_type"`
	TimeNanos   int64      `json:"time_nanos"`
	Duration    int64      `json:"duration_nanos"`
	Samples     int        `json:"samples"`
	Mappings    []mapping  `json:"mappings"`
	Functions   []string   `json:"functions"`
	Totals      []int64    `json:"totals"`
	StrLabels   []string   `json:"str_labels"`
	NumLabels   []string   `json:"num_labels"`
}

func main() {
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	p, err := profile.Parse(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "parse:", err)
		os.Exit(1)
	}
	if err := p.CheckValid(); err != nil {
		fmt.Fprintln(os.Stderr, "CheckValid:", err)
		os.Exit(1)
	}
	s := shape{Period: p.Period, Default: p.DefaultSampleType, TimeNanos: p.TimeNanos, Duration: p.DurationNanos, Samples: len(p.Sample)}
	for _, t := range p.SampleType {
		s.SampleTypes = append(s.SampleTypes, t.Type+"/"+t.Unit)
		s.Totals = append(s.Totals, 0)
	}
	if p.PeriodType != nil {
		s.PeriodType = p.PeriodType.Type + "/" + p.PeriodType.Unit
	}
	for _, m := range p.Mapping {
		s.Mappings = append(s.Mappings, mapping{m.File, m.BuildID, m.HasFunctions, m.HasFilenames})
	}
	for _, fn := range p.Function {
		s.Functions = append(s.Functions, fn.Name)
	}
	seen := map[string]bool{}
	for _, smp := range p.Sample {
		for i, v := range smp.Value {
			s.Totals[i] += v
		}
		for k, vs := range smp.Label {
			for _, v := range vs {
				if !seen["s"+k+"="+v] {
					seen["s"+k+"="+v] = true
					s.StrLabels = append(s.StrLabels, k+"="+v)
				}
			}
		}
		for k, vs := range smp.NumLabel {
			for _, v := range vs {
				key := fmt.Sprintf("%s=%d", k, v)
				if !seen["n"+key] {
					seen["n"+key] = true
					s.NumLabels = append(s.NumLabels, key)
				}
			}
		}
	}
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
}
