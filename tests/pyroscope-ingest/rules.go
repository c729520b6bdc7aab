// Pyroscope's /ingest rules that do not depend on HTTP: the series-name grammar, the metric a
// profile is filed under, the profile type ID, the limits and the timestamp rules. Each rule names
// where Grafana Pyroscope (v2.2) keeps it, so a reader can check the double against the server.

package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/pprof/profile"
)

// Server defaults (pkg/validation/limits.go, pkg/og/convert/pprof/profile.go).
const (
	bodyLimitBytes        = 256 << 20 // -distributor.ingestion-body-limit-mb, before decompression
	profileLimitBytes     = 4 << 20   // -validation.max-profile-size-bytes, decompressed
	sampleLimit           = 16000     // -validation.max-profile-stacktrace-samples
	sampleLabelLimit      = 100       // -validation.max-profile-stacktrace-sample-labels
	seriesLabelNamesLimit = 30        // -validation.max-label-names-per-series
	labelNameLimit        = 1024
	labelValueLimit       = 2048
	tenantIDLimit         = 150 // dskit tenant.MaxTenantIDLength
	formMemoryBytes       = 32 << 20
	acceptedAge           = time.Hour        // reject-older-than
	acceptedFuture        = 10 * time.Minute // reject-newer-than
	unknownSpy            = "unknown"
)

// seriesName is what the `name` query parameter says: the service and its tags, in order.
type seriesName struct {
	service string
	tags    [][2]string
}

// parseSeriesName reads `service{k=v,...}` as labelset.Parse does: the service is the trimmed text
// before `{`, keys and values are trimmed, a value ends at `,` or `}` (no escaping; `=` inside a value
// stays), and whatever follows `}` is ignored.
func parseSeriesName(text string) (seriesName, error) {
	var out seriesName
	brace := strings.IndexByte(text, '{')
	head, body := text, ""
	if brace >= 0 {
		head, body = text[:brace], text[brace+1:]
		if end := strings.IndexByte(body, '}'); end >= 0 {
			body = body[:end]
		}
	}
	out.service = strings.TrimSpace(head)
	if out.service == "" {
		return out, fmt.Errorf("service name is required")
	}
	if bad := firstRuneOutside(out.service, "_./-"); bad >= 0 {
		return out, fmt.Errorf("invalid service name: %q: character %q is not allowed", out.service, rune(bad))
	}
	if strings.TrimSpace(body) == "" {
		return out, nil
	}
	for _, pair := range strings.Split(body, ",") {
		eq := strings.IndexByte(pair, '=')
		if eq < 0 {
			// The research does not pin what the server does with a key and no '=': the double refuses,
			// so a client that sends one finds out here.
			return out, fmt.Errorf("tag %q has no '='", strings.TrimSpace(pair))
		}
		key, value := strings.TrimSpace(pair[:eq]), strings.TrimSpace(pair[eq+1:])
		if key == "" {
			return out, fmt.Errorf("tag %q has an empty key", strings.TrimSpace(pair))
		}
		if key != "__name__" {
			if bad := firstRuneOutside(key, "_."); bad >= 0 {
				return out, fmt.Errorf("invalid tag key %q: character %q is not allowed", key, rune(bad))
			}
		}
		out.tags = append(out.tags, [2]string{key, value})
	}
	return out, nil
}

// firstRuneOutside returns the first rune of s that is neither an ASCII letter or digit nor one of
// extra, or -1 when there is none.
func firstRuneOutside(s, extra string) int {
	for _, r := range s {
		alnum := r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		if !alnum && !strings.ContainsRune(extra, r) {
			return int(r)
		}
	}
	return -1
}

// checkTenant applies dskit's tenant ID rules (tenant/tenant.go): 1–150 bytes of letters, digits and
// `!-_.*'()`, and neither `.` nor `..`.
func checkTenant(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("no org id")
	case len(id) > tenantIDLimit:
		return fmt.Errorf("tenant ID is %d bytes long, limit %d", len(id), tenantIDLimit)
	case id == "." || id == "..":
		return fmt.Errorf("tenant ID %q is not allowed", id)
	}
	if bad := firstRuneOutside(id, "!-_.*'()"); bad >= 0 {
		return fmt.Errorf("tenant ID %q: character %q is not allowed", id, rune(bad))
	}
	return nil
}

// sampleTypeSettings is one entry of the `sample_type_config` part (pkg/og/storage/tree/pprof.go).
// Only DisplayName changes anything on the pprof path; the rest is read to reject bad JSON as the
// server does.
type sampleTypeSettings struct {
	Units       string `json:"units,omitempty"`
	DisplayName string `json:"display-name,omitempty"`
	Aggregation string `json:"aggregation,omitempty"`
	Cumulative  bool   `json:"cumulative,omitempty"`
	Sampled     bool   `json:"sampled,omitempty"`
}

// builtinDisplayNames is the display-name column of tree.DefaultSampleTypeMapping, used when an upload
// carries no `sample_type_config` part. Types absent here keep their own name.
var builtinDisplayNames = map[string]string{
	"samples":     "cpu",
	"goroutine":   "goroutines",
	"contentions": "mutex_count",
	"delay":       "mutex_duration",
}

// metricFor is metricName() of pkg/og/convert/pprof/profile.go: `wall` wins outright; otherwise the
// first sample type whose display name (or own name) matches a rule decides, and when none matches the
// last sample type's display name (or own name) is the metric, as the server keeps it (that is how a
// `display-name` of `fgprof` files a wall-clock profile as `fgprof`). config is nil when the upload had
// no `sample_type_config` part. It returns "" only for a profile without sample types.
func metricFor(types []*profile.ValueType, config map[string]sampleTypeSettings) string {
	for _, t := range types {
		if t.Type == "wall" {
			return "wall"
		}
	}
	last := ""
	for _, t := range types {
		shown := t.Type
		if config == nil {
			if d, ok := builtinDisplayNames[t.Type]; ok {
				shown = d
			}
		} else if c, ok := config[t.Type]; ok && c.DisplayName != "" {
			shown = c.DisplayName
		}
		switch {
		case strings.Contains(shown, "cpu"):
			return "process_cpu"
		case strings.Contains(shown, "alloc_"), strings.Contains(shown, "inuse_"), shown == "space", shown == "objects":
			return "memory"
		case strings.Contains(shown, "mutex_"):
			return "mutex"
		case strings.Contains(shown, "block_"):
			return "block"
		case strings.Contains(shown, "goroutines"):
			return "goroutines"
		}
		last = shown
	}
	return last
}

// profileTypeID is `__profile_type__` (pkg/phlaredb/labels CreateProfileLabels) for one sample type.
func profileTypeID(metric string, sampleType, period *profile.ValueType) string {
	periodType, periodUnit := "", ""
	if period != nil {
		periodType, periodUnit = period.Type, period.Unit
	}
	return strings.Join([]string{metric, sampleType.Type, sampleType.Unit, periodType, periodUnit}, ":")
}

// uploadTime reads `from` as attime.Parse does for all-digit input (8 digits YYYYMMDD, 13 ms, 16 µs,
// 19 ns, anything else seconds). Relative forms (`now-1h`) and bad input fall back to now; nl6 never
// sends them.
func uploadTime(text string, now time.Time) time.Time {
	if text == "" {
		return now
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return now
	}
	switch len(text) {
	case 8:
		if t, err := time.ParseInLocation("20060102", text, time.UTC); err == nil {
			return t
		}
		return now
	case 13:
		return time.UnixMilli(n)
	case 16:
		return time.UnixMicro(n)
	case 19:
		return time.Unix(0, n)
	}
	return time.Unix(n, 0)
}

// profileInstant is the time the server files a profile under: its own TimeNanos unless that is zero
// or in 1970 (fixTime in profile.go), then the request's `from`.
func profileInstant(p *profile.Profile, from time.Time) time.Time {
	t := time.Unix(0, p.TimeNanos)
	if p.TimeNanos == 0 || t.UTC().Year() == 1970 {
		return from
	}
	return t
}

// checkProfileLimits applies ValidateProfile's defaults: sample count, sample-type names, the time
// window, labels per sample and UTF-8 in every string the profile carries.
func checkProfileLimits(p *profile.Profile, at, now time.Time) error {
	if n := len(p.Sample); n > sampleLimit {
		return fmt.Errorf("profile has %d samples, limit %d", n, sampleLimit)
	}
	for _, t := range p.SampleType {
		if strings.Contains(t.Type, "-") {
			return fmt.Errorf("sample type %q contains '-'", t.Type)
		}
	}
	if at.Before(now.Add(-acceptedAge)) || at.After(now.Add(acceptedFuture)) {
		return fmt.Errorf("profile time %s is outside [now-1h, now+10m] (now %s)",
			at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	for i, s := range p.Sample {
		if n := len(s.Label) + len(s.NumLabel); n > sampleLabelLimit {
			return fmt.Errorf("sample %d has %d labels, limit %d", i, n, sampleLabelLimit)
		}
	}
	return checkUTF8(p)
}

func checkUTF8(p *profile.Profile) error {
	bad := func(what, s string) error {
		if utf8.ValidString(s) {
			return nil
		}
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	for _, f := range p.Function {
		if err := bad("function name", f.Name); err != nil {
			return err
		}
		if err := bad("file name", f.Filename); err != nil {
			return err
		}
	}
	for _, s := range p.Sample {
		for k, vs := range s.Label {
			if err := bad("label name", k); err != nil {
				return err
			}
			for _, v := range vs {
				if err := bad("label value", v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkSeriesLabels applies ValidateLabels to one series' label set.
func checkSeriesLabels(labels map[string]string) error {
	if n := len(labels); n > seriesLabelNamesLimit {
		return fmt.Errorf("series has %d label names, limit %d", n, seriesLabelNamesLimit)
	}
	for k, v := range labels {
		if len(k) > labelNameLimit {
			return fmt.Errorf("label name %.40q… is %d bytes, limit %d", k, len(k), labelNameLimit)
		}
		if len(v) > labelValueLimit {
			return fmt.Errorf("value of label %q is %d bytes, limit %d", k, len(v), labelValueLimit)
		}
	}
	return nil
}

// seriesBase is createLabels (profile.go): the metric, `__delta__`, the spy, service_name unless a
// tag sets it, and every tag that may be ingested (no `__` prefix except `__session_id__`).
func seriesBase(metric, spy string, name seriesName) map[string]string {
	labels := map[string]string{"__name__": metric, "__delta__": "false", "pyroscope_spy": spy}
	hasService := false
	for _, kv := range name.tags {
		if kv[0] == "service_name" {
			hasService = true
		}
		if strings.HasPrefix(kv[0], "__") && kv[0] != "__session_id__" {
			continue
		}
		labels[kv[0]] = kv[1]
	}
	if !hasService {
		labels["service_name"] = name.service
	}
	return labels
}

// splitKeysSkipped are sample labels pprofsplit leaves out of the series (profile_id becomes span_id).
var splitKeysSkipped = map[string]bool{"trace_id": true, "span_id": true, "profile_id": true}

// sampleSeries adds a sample's string labels to a copy of base (pprofsplit.VisitSampleSeries): an empty
// value or a name already present is skipped, so a sample cannot override service_name.
func sampleSeries(base map[string]string, s *profile.Sample) map[string]string {
	out := make(map[string]string, len(base)+len(s.Label))
	for k, v := range base {
		out[k] = v
	}
	for k, vs := range s.Label {
		if splitKeysSkipped[k] || len(vs) == 0 || vs[0] == "" {
			continue
		}
		if _, taken := out[k]; !taken {
			out[k] = vs[0]
		}
	}
	return out
}
