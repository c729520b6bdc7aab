// Command pyroscope-ingest is nl6's test double for Grafana Pyroscope's push endpoint, `POST /ingest`.
//
// Pyroscope itself cannot run in nl6's test environment, so the push tests upload to this program. It
// applies the server's /ingest rules (routing, auth, body formats, multipart fields, name grammar,
// metric naming, limits, status codes; each rule in rules.go and ingest.go names its place in
// grafana/pyroscope v2.2) and decodes every profile with github.com/google/pprof/profile, an independent
// pprof parser, so a test that passes here has sent what a real server accepts. It keeps sums per
// series, not profiles.
//
// Build: scripts/build-pyroscope-ingest.sh (Debian's golang-go and golang-github-google-pprof-dev,
// offline, GOPATH mode). Flags: see -h. Loopback only.
//
// The tests read the results back through its own JSON surface (not Pyroscope's API):
//
//	GET  /ready                                    200 once listening
//	GET  /api/profile-types                        ["process_cpu:cpu:nanoseconds:cpu:nanoseconds", ...]
//	GET  /api/label-values?name=subsystem          ["flow", "snmp", ...]
//	GET  /api/query?type=<type ID>&selector={k="v"} {"total":N,"profiles":K,"series":S,"top":[...]}
//	GET  /api/requests                             every /ingest request: status, error, parts, user, tenant
//	POST /api/reset                                forget everything
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

// options are the command-line flags.
type options struct {
	listen       string
	multitenancy bool
	basicAuth    string
	failStatus   int
	delay        time.Duration
	tlsCert      string
	tlsKey       string
}

// double is the running server: its options and what it stored.
type double struct {
	opts  options
	store *store
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("pyroscope-ingest", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:4040", "loopback `address` to listen on")
	fs.BoolVar(&o.multitenancy, "multitenancy", false, "require X-Scope-OrgID (401 without it), as -auth.multitenancy-enabled")
	fs.StringVar(&o.basicAuth, "basic-auth", "", "`user:pass` an authenticating proxy in front of the server demands (401 otherwise)")
	fs.IntVar(&o.failStatus, "fail-status", 0, "answer every authenticated upload with this `status` and store nothing")
	fs.DurationVar(&o.delay, "delay", 0, "wait this long before answering an upload (a slow collector)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate `file`: serve HTTPS (needs -tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key `file` for -tls-cert")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return o, fmt.Errorf("-tls-cert and -tls-key go together")
	}
	if o.failStatus != 0 && (o.failStatus < 100 || o.failStatus > 599) {
		return o, fmt.Errorf("-fail-status %d is not an HTTP status", o.failStatus)
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return o, fmt.Errorf("-listen %q: %v", o.listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return o, fmt.Errorf("-listen %q: loopback addresses only", o.listen)
	}
	return o, nil
}

func (d *double) routes() *http.ServeMux {
	mux := http.NewServeMux()
	// pkg/api/api.go registers the same handler at both paths.
	mux.HandleFunc("/ingest", d.serveIngest)
	mux.HandleFunc("/pyroscope/ingest", d.serveIngest)
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ready") })
	mux.HandleFunc("/api/profile-types", d.store.serveProfileTypes)
	mux.HandleFunc("/api/label-values", d.store.serveLabelValues)
	mux.HandleFunc("/api/query", d.store.serveQuery)
	mux.HandleFunc("/api/requests", d.store.serveRequests)
	mux.HandleFunc("/api/reset", d.store.serveReset)
	return mux
}

func main() {
	opts, err := parseOptions(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pyroscope-ingest:", err)
		os.Exit(2)
	}
	d := &double{opts: opts, store: newStore()}
	listener, err := net.Listen("tcp", opts.listen)
	if err != nil {
		log.Fatalf("pyroscope-ingest: %v", err)
	}
	server := &http.Server{Handler: d.routes(), ReadHeaderTimeout: 10 * time.Second}
	scheme := "http"
	if opts.tlsCert != "" {
		scheme = "https"
	}
	log.Printf("pyroscope-ingest: %s://%s", scheme, listener.Addr())
	if opts.tlsCert != "" {
		err = server.ServeTLS(listener, opts.tlsCert, opts.tlsKey)
	} else {
		err = server.Serve(listener)
	}
	log.Fatalf("pyroscope-ingest: %v", err)
}
