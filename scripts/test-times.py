#!/usr/bin/env python3
"""The slowest tests of a cargo-nextest run, from its JUnit report, and the run's totals.

    python3 scripts/test-times.py target/nextest/ci/junit.xml [N]

Prints the N (default 15) slowest tests with their seconds and binary, then one line
`nextest: P passed, F failed, S skipped` over every run the report holds (scripts/test.sh runs nextest
twice, host and static musl; the report is the last run's, so the host run's table is printed after it).
"""
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: test-times.py JUNIT_XML [N]", file=sys.stderr)
        return 2
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"test-times: cannot read {path}: {e}", file=sys.stderr)
        return 1
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
    rows.sort(reverse=True)
    print(f"slowest {min(top, len(rows))} of {len(rows)} tests ({path}):")
    for secs, binary, name in rows[:top]:
        print(f"{secs:8.1f} s  {binary}  {name}")
    print(f"nextest: {passed} passed, {failed} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
