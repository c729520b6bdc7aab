#!/usr/bin/env python3
"""The slowest tests of cargo-nextest runs, from their JUnit reports, and the runs' totals.

    python3 scripts/test-times.py N JUNIT_XML [JUNIT_XML ...]

For each report, the N slowest tests with their seconds and binary; then one line
`nextest: P passed, F failed, S skipped` over every report (scripts/test.sh passes the host run's and the
static musl run's).
"""
import sys
import xml.etree.ElementTree as ET


def read(path: str):
    """(rows, passed, failed, skipped) of one report; rows are (seconds, binary, test)."""
    root = ET.parse(path).getroot()
    rows, passed, failed, skipped = [], 0, 0, 0
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            if case.find("skipped") is not None:
                skipped += 1
                continue
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            else:
                passed += 1
            rows.append((float(case.get("time", "0")), suite.get("name", "?"), case.get("name", "?")))
    return rows, passed, failed, skipped


def main() -> int:
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        print("usage: test-times.py N JUNIT_XML [JUNIT_XML ...]", file=sys.stderr)
        return 2
    top = int(sys.argv[1])
    totals = [0, 0, 0]
    for path in sys.argv[2:]:
        try:
            rows, *counts = read(path)
        except (OSError, ET.ParseError) as e:
            print(f"test-times: cannot read {path}: {e}", file=sys.stderr)
            return 1
        totals = [t + c for t, c in zip(totals, counts)]
        rows.sort(reverse=True)
        print(f"slowest {min(top, len(rows))} of {len(rows)} tests ({path}):")
        for secs, binary, name in rows[:top]:
            print(f"{secs:8.1f} s  {binary}  {name}")
    print(f"nextest: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
