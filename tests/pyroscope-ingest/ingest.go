// The `POST /ingest` handler: the checks in the order Pyroscope's middleware and handler run them
// (auth, delay, body limit, then the pprof path of ingest_handler.go), every profile decoded by
// github.com/google/pprof/profile, and one record per request for the tests to inspect.

package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// refusal is an answer other than 200: the status Pyroscope would give and why.
type refusal struct {
	status int
	reason string
}

func refuse(status int, format string, args ...interface{}) *refusal {
	return &refusal{status: status, reason: fmt.Sprintf(format, args...)}
}

// upload is what one request carried once the transport is peeled off.
type upload struct {
	name    seriesName
	spy     string
	from    time.Time
	pprof   []byte                        // the `profile` bytes, gzip or plain; nil = nothing to store
	configs map[string]sampleTypeSettings // nil when no `sample_type_config` part came
}

// serveIngest answers one upload and records it.
func (d *double) serveIngest(w http.ResponseWriter, r *http.Request) {
	rec := ingestRecord{
		At:          time.Now().UTC(),
		Path:        r.URL.Path,
		Query:       flattenQuery(r),
		ContentType: r.Header.Get("Content-Type"),
		Tenant:      r.Header.Get("X-Scope-OrgID"),
		UserAgent:   r.Header.Get("User-Agent"),
	}
	if user, _, ok := r.BasicAuth(); ok {
		rec.BasicAuthUser = user
	}
	written, no := d.ingest(r, &rec)
	rec.SeriesWritten = written
	rec.Status = http.StatusOK
	if no != nil {
		rec.Status, rec.Error = no.status, no.reason
	}
	d.store.remember(rec)
	if no == nil {
		return // 200 with an empty body, as the server answers
	}
	// ErrorWithStatus (pkg/util/http/error.go): a JSON body, never sniffed.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(no.status)
	_ = json.NewEncoder(w).Encode(map[string]interface{}{"code": no.status, "message": no.reason})
}

// ingest runs the checks and stores the profile; it returns the number of series written.
func (d *double) ingest(r *http.Request, rec *ingestRecord) (int, *refusal) {
	if r.Method != http.MethodPost {
		return 0, refuse(http.StatusMethodNotAllowed, "%s %s: only POST is routed", r.Method, r.URL.Path)
	}
	if no := d.authenticate(r); no != nil {
		return 0, no
	}
	if d.opts.delay > 0 {
		time.Sleep(d.opts.delay)
	}
	if d.opts.failStatus != 0 {
		return 0, refuse(d.opts.failStatus, "-fail-status %d: every upload is refused", d.opts.failStatus)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, bodyLimitBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return 0, refuse(http.StatusRequestEntityTooLarge, "request body too large: limit %d bytes", bodyLimitBytes)
		}
		return 0, refuse(http.StatusRequestTimeout, "reading the body: %v", err)
	}
	up, no := readUpload(r, body, rec)
	if no != nil {
		return 0, no
	}
	if d.opts.multitenancy {
		// ParseToPprof resolves the tenant with dskit's rules; without multitenancy it is "anonymous".
		if err := checkTenant(r.Header.Get("X-Scope-OrgID")); err != nil {
			return 0, refuse(http.StatusUnprocessableEntity, "%v", err)
		}
	}
	return d.file(up)
}

// authenticate plays the authenticating proxy (-basic-auth) and the multitenancy check.
func (d *double) authenticate(r *http.Request) *refusal {
	if d.opts.basicAuth != "" {
		user, pass, ok := r.BasicAuth()
		if !ok || user+":"+pass != d.opts.basicAuth {
			return refuse(http.StatusUnauthorized, "basic auth required (the proxy in front of Pyroscope)")
		}
	}
	if d.opts.multitenancy && r.Header.Get("X-Scope-OrgID") == "" {
		return refuse(http.StatusUnauthorized, "no org id: multitenancy is on and X-Scope-OrgID is missing")
	}
	return nil
}

// readUpload picks the body format as ingest_handler.go does and pulls the pprof out of it.
func readUpload(r *http.Request, body []byte, rec *ingestRecord) (upload, *refusal) {
	q := r.URL.Query()
	name, err := parseSeriesName(q.Get("name"))
	if err != nil {
		return upload{}, refuse(http.StatusBadRequest, "name: %v", err)
	}
	up := upload{name: name, spy: q.Get("spyName"), from: uploadTime(q.Get("from"), time.Now())}
	if up.spy == "" {
		up.spy = unknownSpy
	}
	contentType := r.Header.Get("Content-Type")
	switch format := q.Get("format"); {
	case format == "pprof":
		up.pprof = body
	case format == "trie", format == "tree", format == "lines", format == "jfr", format == "speedscope",
		strings.HasPrefix(contentType, "binary/octet-stream+"):
		return up, refuse(http.StatusUnprocessableEntity, "format %q: this double reads pprof only", format)
	case strings.Contains(contentType, "multipart/form-data"):
		if no := readForm(contentType, body, &up, rec); no != nil {
			return up, no
		}
	default:
		return up, refuse(http.StatusUnprocessableEntity,
			"no format=pprof and no multipart/form-data body: the server would parse this as the 'groups' text format")
	}
	return up, nil
}

// readForm reads the multipart body with Go's ReadForm, as the server does: a part without a filename
// lands among the plain values, where form.ReadField never looks.
func readForm(contentType string, body []byte, up *upload, rec *ingestRecord) *refusal {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return refuse(http.StatusUnprocessableEntity, "multipart content type %q has no boundary", contentType)
	}
	form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(formMemoryBytes)
	if err != nil {
		return refuse(http.StatusUnprocessableEntity, "reading the form: %v", err)
	}
	defer form.RemoveAll()
	rec.Parts = describeParts(form)
	if prev, err := fileField(form, "prev_profile"); err != nil || len(prev) > 0 {
		return refuse(http.StatusUnprocessableEntity,
			"unsupported client version: a non-empty prev_profile part is refused")
	}
	if up.pprof, err = fileField(form, "profile"); err != nil {
		return refuse(http.StatusUnprocessableEntity, "profile part: %v", err)
	}
	config, err := fileField(form, "sample_type_config")
	if err != nil {
		return refuse(http.StatusUnprocessableEntity, "sample_type_config part: %v", err)
	}
	if len(config) > 0 {
		up.configs = map[string]sampleTypeSettings{}
		if err := json.Unmarshal(config, &up.configs); err != nil {
			return refuse(http.StatusUnprocessableEntity, "sample_type_config: %v", err)
		}
	}
	return nil
}

// fileField is form.ReadField: the first file part of that name; a missing or empty one reads as nil.
func fileField(form *multipart.Form, field string) ([]byte, error) {
	headers := form.File[field]
	if len(headers) == 0 || headers[0].Size == 0 {
		return nil, nil
	}
	f, err := headers[0].Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// describeParts names every part and whether the server can see it ("profile (file)").
func describeParts(form *multipart.Form) []string {
	var out []string
	for field := range form.File {
		out = append(out, field+" (file)")
	}
	for field := range form.Value {
		out = append(out, field+" (value without filename: the server never reads it)")
	}
	sort.Strings(out)
	return out
}

// file decodes, validates and stores one profile; an empty one is answered 200 and stored nowhere.
func (d *double) file(up upload) (int, *refusal) {
	if len(up.pprof) == 0 {
		return 0, nil // "empty profile": logged by the server, nothing stored
	}
	p, err := decodePprof(up.pprof)
	if err != nil {
		return 0, refuse(http.StatusUnprocessableEntity, "%v", err)
	}
	now := time.Now()
	if err := checkProfileLimits(p, profileInstant(p, up.from), now); err != nil {
		return 0, refuse(http.StatusUnprocessableEntity, "%v", err)
	}
	if len(p.Sample) == 0 {
		return 0, nil // normalisation leaves nothing: 200, stored nowhere
	}
	metric := metricFor(p.SampleType, up.configs)
	if metric == "" {
		return 0, refuse(http.StatusUnprocessableEntity,
			"no sample type of %s names a profile type this double knows", describeTypes(p.SampleType))
	}
	base := seriesBase(metric, up.spy, up.name)
	var adds []seriesAdd
	for _, s := range p.Sample {
		labels := sampleSeries(base, s)
		if err := checkSeriesLabels(labels); err != nil {
			return 0, refuse(http.StatusUnprocessableEntity, "%v", err)
		}
		for i, t := range p.SampleType {
			adds = append(adds, seriesAdd{
				typeID: profileTypeID(metric, t, p.PeriodType),
				labels: labels,
				value:  s.Value[i],
				leaf:   leafFunction(s),
			})
		}
	}
	return d.store.add(adds), nil
}

// decodePprof gunzips (bounded by the decompressed-size limit) and parses with google/pprof, then runs
// its validity checks. Only the protobuf encoding is accepted, never the legacy text formats.
func decodePprof(raw []byte) (*profile.Profile, error) {
	plain := raw
	if len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("gzip: %v", err)
		}
		if plain, err = io.ReadAll(io.LimitReader(zr, profileLimitBytes+1)); err != nil {
			return nil, fmt.Errorf("gzip: %v", err)
		}
	}
	if len(plain) > profileLimitBytes {
		return nil, fmt.Errorf("profile exceeds %d bytes decompressed", profileLimitBytes)
	}
	p, err := profile.ParseUncompressed(plain)
	if err != nil {
		return nil, fmt.Errorf("not a pprof profile: %v", err)
	}
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("malformed pprof profile: %v", err)
	}
	return p, nil
}

// leafFunction names the innermost frame: the first line of the first location.
func leafFunction(s *profile.Sample) string {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
		return ""
	}
	return s.Location[0].Line[0].Function.Name
}

func describeTypes(types []*profile.ValueType) string {
	names := make([]string, 0, len(types))
	for _, t := range types {
		names = append(names, t.Type+"/"+t.Unit)
	}
	return "[" + strings.Join(names, " ") + "]"
}

func flattenQuery(r *http.Request) map[string]string {
	out := map[string]string{}
	for k, vs := range r.URL.Query() {
		out[k] = strings.Join(vs, ",")
	}
	return out
}
