// What the double remembers (the series it wrote and every request it saw) and the small JSON query
// surface the tests read it back with. This surface is the double's own, not Pyroscope's API.

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ingestRecord is one request to /ingest, as GET /api/requests lists it. The basic-auth password is
// never kept.
type ingestRecord struct {
	At            time.Time         `json:"time"`
	Path          string            `json:"path"`
	Query         map[string]string `json:"query"`
	ContentType   string            `json:"content_type"`
	BasicAuthUser string            `json:"authorization_user,omitempty"`
	Tenant        string            `json:"tenant,omitempty"`
	UserAgent     string            `json:"user_agent,omitempty"`
	Parts         []string          `json:"parts,omitempty"`
	Status        int               `json:"status"`
	Error         string            `json:"error,omitempty"`
	SeriesWritten int               `json:"series_written"`
}

// seriesAdd is one sample value bound for one series.
type seriesAdd struct {
	typeID string
	labels map[string]string
	value  int64
	leaf   string
}

// seriesTotals is what the double keeps of a series: sums, not profiles.
type seriesTotals struct {
	typeID   string
	labels   map[string]string
	total    int64
	profiles int              // uploads that wrote to this series
	byLeaf   map[string]int64 // value per innermost function
}

type store struct {
	mu       sync.Mutex
	series   map[string]*seriesTotals // keyed by seriesKey
	requests []ingestRecord
}

func newStore() *store {
	return &store{series: map[string]*seriesTotals{}}
}

// seriesKey is the profile type followed by the sorted label pairs: one key per series.
func seriesKey(typeID string, labels map[string]string) string {
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, strconv.Quote(k)+"="+strconv.Quote(v))
	}
	sort.Strings(pairs)
	return typeID + "{" + strings.Join(pairs, ",") + "}"
}

// add applies one upload's values and returns how many distinct series it wrote.
func (s *store) add(adds []seriesAdd) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	touched := map[string]bool{}
	for _, a := range adds {
		key := seriesKey(a.typeID, a.labels)
		st, ok := s.series[key]
		if !ok {
			st = &seriesTotals{typeID: a.typeID, labels: a.labels, byLeaf: map[string]int64{}}
			s.series[key] = st
		}
		if !touched[key] {
			touched[key] = true
			st.profiles++
		}
		st.total += a.value
		st.byLeaf[a.leaf] += a.value
	}
	return len(touched)
}

func (s *store) remember(rec ingestRecord) {
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
}

// matchers reads `{k="v",...}`: equality only, values in Go string syntax. Empty means all.
func matchers(selector string) (map[string]string, error) {
	text := strings.TrimSpace(selector)
	out := map[string]string{}
	if text == "" || text == "{}" {
		return out, nil
	}
	if !strings.HasPrefix(text, "{") || !strings.HasSuffix(text, "}") {
		return nil, fmt.Errorf("selector %q: want {name=\"value\",...}", selector)
	}
	for _, m := range strings.Split(text[1:len(text)-1], ",") {
		eq := strings.IndexByte(m, '=')
		if eq < 0 {
			return nil, fmt.Errorf("matcher %q: want name=\"value\" (equality only)", m)
		}
		value, err := strconv.Unquote(strings.TrimSpace(m[eq+1:]))
		if err != nil {
			return nil, fmt.Errorf("matcher %q: the value must be a quoted string", m)
		}
		out[strings.TrimSpace(m[:eq])] = value
	}
	return out, nil
}

func (st *seriesTotals) matches(typeID string, want map[string]string) bool {
	if typeID != "" && st.typeID != typeID {
		return false
	}
	for k, v := range want {
		if got, ok := st.labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

type leafValue struct {
	Function string `json:"function"`
	Value    int64  `json:"value"`
}

// serveQuery: GET /api/query?type=<profile type ID>&selector={...} sums every matching series.
func (s *store) serveQuery(w http.ResponseWriter, r *http.Request) {
	want, err := matchers(r.URL.Query().Get("selector"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	typeID := r.URL.Query().Get("type")
	var total int64
	profiles, matched := 0, 0
	leaves := map[string]int64{}
	s.mu.Lock()
	for _, st := range s.series {
		if !st.matches(typeID, want) {
			continue
		}
		matched++
		total += st.total
		profiles += st.profiles
		for f, v := range st.byLeaf {
			leaves[f] += v
		}
	}
	s.mu.Unlock()
	top := make([]leafValue, 0, len(leaves))
	for f, v := range leaves {
		top = append(top, leafValue{f, v})
	}
	sort.Slice(top, func(i, j int) bool {
		if top[i].Value != top[j].Value {
			return top[i].Value > top[j].Value
		}
		return top[i].Function < top[j].Function
	})
	if len(top) > 20 {
		top = top[:20]
	}
	answer(w, map[string]interface{}{"total": total, "profiles": profiles, "series": matched, "top": top})
}

// serveLabelValues: GET /api/label-values?name=L lists L's values over every series, sorted.
func (s *store) serveLabelValues(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	s.mu.Lock()
	values := distinct(s.series, func(st *seriesTotals) (string, bool) {
		v, ok := st.labels[name]
		return v, ok
	})
	s.mu.Unlock()
	answer(w, values)
}

// serveProfileTypes: GET /api/profile-types lists every profile type ID written, sorted.
func (s *store) serveProfileTypes(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	types := distinct(s.series, func(st *seriesTotals) (string, bool) { return st.typeID, true })
	s.mu.Unlock()
	answer(w, types)
}

func distinct(series map[string]*seriesTotals, pick func(*seriesTotals) (string, bool)) []string {
	set := map[string]struct{}{}
	for _, st := range series {
		if v, ok := pick(st); ok {
			set[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// serveRequests: GET /api/requests lists every /ingest request in arrival order.
func (s *store) serveRequests(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	list := append([]ingestRecord{}, s.requests...)
	s.mu.Unlock()
	answer(w, list)
}

// serveReset: POST /api/reset forgets every series and request.
func (s *store) serveReset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST /api/reset", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	s.series = map[string]*seriesTotals{}
	s.requests = nil
	s.mu.Unlock()
	answer(w, map[string]string{"reset": "ok"})
}

func answer(w http.ResponseWriter, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
