//! Flag table consistency, both dash styles, every refusal, and phase two (the auth file, the adhoc
//! variable).
use super::config::Config;
use super::*;

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn serve(args: &[&str]) -> Args {
    match parse(os(args)) {
        Ok(Mode::Serve(a)) => *a,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn refused(args: &[&str]) -> String {
    match parse(os(args)) {
        Err(CliError(m)) => m,
        other => panic!("{args:?} accepted: {other:?}"),
    }
}

/// A sample value for every flag that takes one; the test below fails when a flag is added without one.
fn sample(name: &str) -> Option<&'static str> {
    Some(match name {
        "port" => "9090",
        "listen" => "127.0.0.1:0",
        "allowed-hosts" => "nl6.lab.example,proxy.example:8443",
        "allowed-origins" => "https://nl6.lab.example",
        "profiling-pyroscope" => "http://127.0.0.1:4040",
        "profiling-pyroscope-basic-auth" => "u:p",
        "profiling-pyroscope-basic-auth-file" => "/nonexistent",
        "profiling-pyroscope-tenant" => "t1",
        "profiling-heap-rate" => "4096",
        "profiling-upload-interval" => "2s",
        _ => return None,
    })
}

#[test]
fn every_flag_is_unique_parsed_in_both_styles_and_documented() {
    let help = help_text();
    let mut seen = std::collections::HashSet::new();
    for f in FLAGS {
        assert!(seen.insert(f.name), "duplicate flag {}", f.name);
        assert!(
            help.contains(&format!("  -{}", f.name)),
            "{} missing from help",
            f.name
        );
        assert!(!f.doc.is_empty() && f.doc.ends_with('.'), "{}", f.name);
        if !f.default.is_empty() {
            assert!(
                help.contains(&format!("(default {})", f.default)),
                "{}",
                f.name
            );
        }
        match f.takes {
            crate::goflag::Takes::Value(_) => {
                let v = sample(f.name).unwrap_or_else(|| panic!("no sample value for -{}", f.name));
                let mut base = vec![format!("-{}", f.name), v.to_string()];
                if f.name != "profiling-pyroscope" {
                    base.extend([
                        "-profiling-pyroscope".to_string(),
                        "http://127.0.0.1:4040".to_string(),
                    ]);
                }
                let single: Vec<&str> = base.iter().map(String::as_str).collect();
                let a = serve(&single);
                let double = format!("--{}={v}", f.name);
                let mut b_args = vec![double.as_str()];
                b_args.extend(&single[2..]);
                assert_eq!(serve(&b_args), a, "{}", f.name);
            }
            crate::goflag::Takes::Bool => {
                let bare = serve(&[&format!("-{}", f.name)]);
                assert_eq!(serve(&[&format!("--{}=true", f.name)]), bare, "{}", f.name);
                assert_ne!(serve(&[&format!("-{}=false", f.name)]), bare, "{}", f.name);
                assert_eq!(
                    serve(&[&format!("-{}=false", f.name)]),
                    serve(&[]),
                    "{}",
                    f.name
                );
            }
            crate::goflag::Takes::Stop => {
                let want = if f.name == "help" {
                    Mode::Help
                } else {
                    Mode::Version
                };
                assert_eq!(parse(os(&[&format!("-{}", f.name)])).unwrap(), want);
                assert_eq!(parse(os(&[&format!("--{}", f.name)])).unwrap(), want);
            }
        }
    }
    assert_eq!(parse(os(&["-h"])).unwrap(), Mode::Help);
}

#[test]
fn defaults_and_values() {
    let a = serve(&[]);
    assert_eq!(a.listen, "0.0.0.0:8080");
    assert_eq!(a.upload_interval, Duration::from_secs(15));
    assert_eq!((a.pyroscope, a.heap_rate), (None, None));
    assert_eq!(serve(&["-port", "9000"]).listen, "0.0.0.0:9000");
    assert_eq!(
        serve(&["-port", "9000", "-listen", "127.0.0.1:7"]).listen,
        "127.0.0.1:7"
    );
    assert_eq!(serve(&["--listen", "localhost:80"]).listen, "localhost:80");
    let a = serve(&[
        "-profiling-pyroscope",
        "http://p:4040",
        "-profiling-pyroscope-basic-auth",
        "user:pa:ss",
    ]);
    assert_eq!(
        a.basic_auth,
        Some(("user".to_string(), "pa:ss".to_string()))
    );
    assert!(
        !format!("{a:?}").contains("pa:ss"),
        "Debug hides the secret"
    );
    assert_eq!(
        serve(&["-profiling-upload-interval", "1m30s"]).upload_interval,
        Duration::from_secs(90)
    );
}

/// `-profiling-wall` is off by default and, given, reaches every push target the gate hands out: the
/// flag's address and a runtime one alike.
#[test]
fn the_wall_flag_reaches_every_push_target() {
    assert!(!serve(&[]).wall);
    assert!(serve(&["-profiling-wall"]).wall);
    let off = resolve(&["-profiling-pyroscope", "http://p:1"], false).unwrap();
    assert!(!off.startup().target_for("http://p:1").0.wall);
    let on = resolve(
        &["-profiling-pyroscope", "http://p:1", "-profiling-wall"],
        false,
    )
    .unwrap();
    assert!(on.startup().target_for("http://p:1").0.wall);
    assert!(on.startup().target_for("http://elsewhere:2").0.wall);
    let runtime_only = resolve(&["-profiling-wall"], false).unwrap();
    assert!(runtime_only.startup().target_for("http://q:3").0.wall);
}

#[test]
fn values_starting_with_a_dash_are_not_rewritten() {
    let a = serve(&[
        "-profiling-pyroscope",
        "http://p:1",
        "-profiling-pyroscope-tenant",
        "-x-tenant",
    ]);
    assert_eq!(a.tenant.as_deref(), Some("-x-tenant"));
    assert_eq!(
        parse(os(&["-port", "1", "-h", "--", "-port"])).unwrap(),
        Mode::Help
    );
    let m = refused(&["-port", "1", "--", "-port"]);
    assert!(m.contains("unexpected argument \"-port\""), "{m}");
}

#[test]
fn subcommands_are_modes() {
    assert_eq!(
        parse(os(&["collect", "-every", "1m"])).unwrap(),
        Mode::Collect(os(&["-every", "1m"]))
    );
    assert_eq!(
        parse(os(&["report", "x"])).unwrap(),
        Mode::Report(os(&["x"]))
    );
}

#[test]
fn every_refusal_names_its_cause() {
    let rows: &[(&[&str], &str)] = &[
        (
            &["-profiling-pyroscope", "http://a:1:2"],
            "-profiling-pyroscope: server address",
        ),
        (&["-profiling-pyroscope", "http://h:0"], "port 0"),
        (
            &["-profiling-pyroscope-basic-auth", "u:p"],
            "-profiling-pyroscope-basic-auth requires -profiling-pyroscope",
        ),
        (
            &["-profiling-pyroscope-basic-auth-file", "/f"],
            "-profiling-pyroscope-basic-auth-file requires -profiling-pyroscope",
        ),
        (
            &["-profiling-pyroscope-tenant", "t"],
            "-profiling-pyroscope-tenant requires -profiling-pyroscope",
        ),
        (
            &[
                "-profiling-pyroscope",
                "http://p:1",
                "-profiling-pyroscope-basic-auth",
                "user",
            ],
            "expected USER:PASS with both parts",
        ),
        (
            &[
                "-profiling-pyroscope",
                "http://p:1",
                "-profiling-pyroscope-basic-auth",
                ":pass",
            ],
            "both parts",
        ),
        (
            &[
                "-profiling-pyroscope",
                "http://p:1",
                "-profiling-pyroscope-basic-auth",
                "user:",
            ],
            "both parts",
        ),
        (
            &[
                "-profiling-pyroscope",
                "http://p:1",
                "-profiling-pyroscope-basic-auth",
                "u:p",
                "-profiling-pyroscope-basic-auth-file",
                "/f",
            ],
            "exclusive",
        ),
        (
            &["-profiling-pyroscope", "ftp://p"],
            "-profiling-pyroscope: server address \"ftp://p\" must use http:// or https://",
        ),
        (
            &["-profiling-pyroscope", "http://u:secret@p"],
            "must not embed credentials",
        ),
        (
            &["-profiling-pyroscope", "http://p/?a=b"],
            "query or a fragment",
        ),
        (
            &["-profiling-pyroscope", "http://p/#x"],
            "query or a fragment",
        ),
        (&["-port", "99999"], "-port: \"99999\" is not a port number"),
        (&["-listen", "nope"], "-listen: \"nope\" is not HOST:PORT"),
        (
            &["-profiling-heap-rate", "-1"],
            "-profiling-heap-rate: \"-1\" is not a byte count",
        ),
        (
            &["-profiling-upload-interval", "500ms"],
            "must be at least 1s",
        ),
        (
            &["-profiling-upload-interval", "soon"],
            "-profiling-upload-interval: invalid duration",
        ),
        (&["-port"], "flag needs an argument: -port"),
        (
            &["-bogus"],
            "flag provided but not defined: -bogus (see nl6 -h)",
        ),
        (
            &["--bogus=1"],
            "flag provided but not defined: --bogus (see nl6 -h)",
        ),
        (
            &["-devics", "3"],
            "flag provided but not defined: -devics (did you mean -devices?)",
        ),
        (&["stray"], "unexpected argument \"stray\""),
        (
            &["colect"],
            "unknown command \"colect\": did you mean collect?",
        ),
        (
            &["reprot", "x"],
            "unknown command \"reprot\": did you mean report?",
        ),
        (
            &["-trap-inform=yes"],
            "-trap-inform: invalid boolean \"yes\"",
        ),
        (&["-listen", ":x"], "-listen: \":x\" is not HOST:PORT"),
    ];
    for (args, want) in rows {
        let m = refused(args);
        assert!(m.contains(want), "{args:?}: {m}");
        assert!(!m.contains('\n'), "one line: {m}");
        assert!(!m.contains("secret"), "{m}");
    }
}

fn resolve(args: &[&str], adhoc: bool) -> Result<Config, CliError> {
    Config::resolve(serve(args), &|name| {
        adhoc && name == "PYROSCOPE_ADHOC_SERVER_ADDRESS"
    })
}

#[test]
fn adhoc_env_is_refused_only_with_the_flag() {
    let e = resolve(&["-profiling-pyroscope", "http://p:1"], true)
        .err()
        .unwrap();
    assert!(
        e.0.contains("PYROSCOPE_ADHOC_SERVER_ADDRESS") && e.0.contains("-profiling-pyroscope"),
        "{e}"
    );
    assert!(
        resolve(&[], true).is_ok(),
        "a process that never profiles is not stopped by it"
    );
}

#[test]
fn the_auth_file_is_read_once_in_phase_two() {
    let dir = std::env::temp_dir().join(format!("nl6-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good");
    std::fs::write(&good, "user:s3cret\n").unwrap();
    let c = resolve(
        &[
            "-profiling-pyroscope",
            "http://p:1",
            "-profiling-pyroscope-basic-auth-file",
            good.to_str().unwrap(),
        ],
        false,
    )
    .unwrap();
    let (target, withheld) = c.startup().target_for("http://p:1/");
    assert_eq!(
        target.basic_auth,
        Some(("user".to_string(), "s3cret".to_string()))
    );
    assert!(!withheld);
    for (name, content, want) in [
        ("empty", "", "expected USER:PASS"),
        ("nocolon", "user\n", "expected USER:PASS"),
        ("two", "a:b\nc:d\n", "found several"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        let e = resolve(
            &[
                "-profiling-pyroscope",
                "http://p:1",
                "-profiling-pyroscope-basic-auth-file",
                p.to_str().unwrap(),
            ],
            false,
        )
        .err()
        .unwrap();
        assert!(
            e.0.contains(want) && e.0.contains(p.to_str().unwrap()),
            "{name}: {e}"
        );
    }
    let e = resolve(
        &[
            "-profiling-pyroscope",
            "http://p:1",
            "-profiling-pyroscope-basic-auth-file",
            "/nonexistent/x",
        ],
        false,
    )
    .err()
    .unwrap();
    assert!(
        e.0.starts_with("-profiling-pyroscope-basic-auth-file /nonexistent/x: "),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn version_names_the_commit() {
    let v = version_line();
    assert!(
        v.starts_with(&format!("nl6 {} (commit ", env!("CARGO_PKG_VERSION"))) && v.ends_with(')'),
        "{v}"
    );
}

#[test]
fn the_systemd_example_uses_only_real_flags_and_the_file_form() {
    let unit = include_str!("../../examples/systemd/nl6.service");
    let exec: String = unit
        .lines()
        .skip_while(|l| !l.starts_with("ExecStart="))
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let flags: Vec<&str> = exec
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('-'))
        .collect();
    assert!(flags.len() >= 3, "{exec}");
    for f in &flags {
        assert!(
            FLAGS.iter().any(|spec| spec.name == *f),
            "unknown flag -{f} in nl6.service"
        );
    }
    assert!(flags.contains(&"profiling-pyroscope-basic-auth-file"));
    assert!(
        !flags.contains(&"profiling-pyroscope-basic-auth"),
        "the secret must stay out of argv"
    );
}

#[test]
fn lab_fleet_flags_parse_in_both_forms_and_are_documented() {
    let a = serve(&["-devices", "7", "--snmp-port=0", "-trap-interval", "5s"]);
    let expected = crate::lab::FleetConfig::default()
        .with_devices(7)
        .with_snmp_port(0);
    let mut expected = expected;
    expected.set("trap-interval", "5s").unwrap();
    assert_eq!(a.fleet, expected);
    let help = help_text();
    for f in crate::lab::FLAGS {
        assert!(help.contains(&f.usage()), "{} missing from --help", f.name);
        assert!(
            !FLAGS.iter().any(|g| g.name == f.name),
            "{} defined twice",
            f.name
        );
    }
    let err = parse(os(&["-devices", "many"])).unwrap_err();
    assert!(err.0.starts_with("-devices"), "{err}");
}

#[test]
fn booleans_are_read_as_go_reads_them() {
    let inform = |args: &[&str]| serve(args).fleet.trap_inform();
    assert!(!inform(&[]));
    assert!(inform(&["-trap-inform"]), "bare means true");
    assert!(inform(&["--trap-inform"]));
    assert!(
        inform(&["-trap-inform", "-devices", "2"]),
        "bare, then another flag"
    );
    assert_eq!(serve(&["-trap-inform", "-devices", "2"]).fleet.devices(), 2);
    for t in ["1", "t", "T", "TRUE", "true", "True"] {
        assert!(inform(&[&format!("-trap-inform={t}")]), "{t}");
        assert!(inform(&["-trap-inform", t]), "{t} as the next argument");
    }
    for f in ["0", "f", "F", "FALSE", "false", "False"] {
        assert!(!inform(&[&format!("-trap-inform={f}")]), "{f}");
        assert!(!inform(&["-trap-inform", f]), "{f} as the next argument");
    }
    for bad in ["yes", "no", "on", "off"] {
        let m = refused(&[&format!("-trap-inform={bad}")]);
        assert!(
            m.contains("1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False"),
            "{m}"
        );
        // Not a boolean literal, so not this flag's value: a stray word.
        assert!(refused(&["-trap-inform", bad]).contains("unexpected argument"));
    }
    assert!(help_text().contains("-trap-inform[=BOOL]"));
}

#[test]
fn listen_with_an_empty_host_means_every_interface() {
    assert_eq!(serve(&["-listen", ":8080"]).listen, "0.0.0.0:8080");
    assert_eq!(serve(&["--listen=:0"]).listen, "0.0.0.0:0");
    assert_eq!(serve(&["-listen", "[::1]:80"]).listen, "[::1]:80");
}

/// The README's flag table, as (flag names, default text) per row: the names are the backticked words
/// starting with `-` in the first cell, the defaults the second cell split at ` / ` (one per name).
fn readme_flag_rows() -> Vec<(Vec<String>, Vec<String>)> {
    let readme = include_str!("../../README.md");
    let table = readme
        .split("| flag | default | meaning |\n|---|---|---|\n")
        .nth(1)
        .expect("README has the serve flag table");
    let mut rows = Vec::new();
    for line in table.lines().take_while(|l| l.starts_with('|')) {
        let line = line.replace("\\|", "/");
        let cells: Vec<&str> = line.split('|').skip(1).map(str::trim).collect();
        let names: Vec<String> = cells[0]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|code| code.strip_prefix('-'))
            .map(|code| {
                let name = code.trim_start_matches('-');
                let end = name.find([' ', '[']).unwrap_or(name.len());
                name[..end].to_string()
            })
            .collect();
        let defaults = cells[1]
            .split(" / ")
            .map(|d| d.trim().to_string())
            .collect();
        rows.push((names, defaults));
    }
    rows
}

#[test]
fn the_readme_flag_table_matches_the_definitions() {
    let mut documented = std::collections::BTreeMap::new();
    for (names, defaults) in readme_flag_rows() {
        for (i, name) in names.iter().enumerate() {
            let name = if name == "h" { "help" } else { name.as_str() };
            let default = defaults.get(i).cloned().unwrap_or_default();
            assert!(
                documented.insert(name.to_string(), default).is_none(),
                "-{name} twice in README"
            );
        }
    }
    let defined: Vec<(&str, &str)> = FLAGS
        .iter()
        .map(|f| (f.name, f.default))
        .chain(crate::lab::FLAGS.iter().map(|f| (f.name, f.default)))
        .collect();
    for (name, default) in &defined {
        let readme = documented
            .get(*name)
            .unwrap_or_else(|| panic!("-{name} is defined but not in README's flag table"));
        let readme = match readme.as_str() {
            "—" | "off" => "",
            d => d,
        };
        assert_eq!(readme, *default, "README's default of -{name}");
    }
    for name in documented.keys() {
        assert!(
            defined.iter().any(|(n, _)| n == name),
            "README documents -{name}, which no table defines"
        );
    }
}
