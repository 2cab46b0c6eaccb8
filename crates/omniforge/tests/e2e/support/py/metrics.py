#!/usr/bin/env python3
"""E2E driver: parse a Prometheus exposition with the official Prometheus Python client.

    python metrics.py URL [--bearer TOKEN]     # GET URL (e.g. http://127.0.0.1:PORT/metrics)
    python metrics.py -                        # read the exposition from stdin

The format is the one the server says it sent: `application/openmetrics-text` (what the Rust
`prometheus-client` crate encodes; on stdin: text ending in `# EOF`) is parsed with
`prometheus_client.openmetrics.parser`, the Prometheus text format 0.0.4 (`text/plain`) with
`prometheus_client.parser`. Both refuse malformed text. Prints one JSON document on stdout:

    {"status": 200, "content_type": "...", "format": "openmetrics" | "text",
     "families": {NAME: {"type", "help", "unit", "samples": [{"name", "labels", "value"}]}}}

Family names are as the parsers give them: a counter `x_total` is the family `x` whose
samples are named `x_total` (and `x_created`). With a URL, a non-200 answer is printed with
its status, WWW-Authenticate and body and no families (exit 0: the test judges the status).
Exit 2 on a parse error, 4 on any other failure.
"""
import json
import sys
import urllib.error
import urllib.request

from prometheus_client.openmetrics import parser as openmetrics_format
from prometheus_client import parser as text_format


def parse(text, fmt):
    families = {}
    parse_families = (openmetrics_format if fmt == "openmetrics" else text_format).text_string_to_metric_families
    for family in parse_families(text):
        families[family.name] = {
            "type": family.type,
            "help": family.documentation,
            "unit": family.unit,
            "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples],
        }
    return families


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    report = {}
    if argv[0] == "-":
        text = sys.stdin.read()
        report["format"] = "openmetrics" if text.rstrip().endswith("# EOF") else "text"
    else:
        headers = {}
        if len(argv) == 3 and argv[1] == "--bearer":
            headers["Authorization"] = f"Bearer {argv[2]}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(urllib.request.Request(argv[0], headers=headers), timeout=10) as r:
                report["status"] = r.status
                report["content_type"] = r.headers.get("Content-Type")
                text = r.read().decode("utf-8")
                is_om = (report["content_type"] or "").startswith("application/openmetrics-text")
                report["format"] = "openmetrics" if is_om else "text"
        except urllib.error.HTTPError as e:
            report.update(status=e.code, content_type=e.headers.get("Content-Type"),
                          www_authenticate=e.headers.get("WWW-Authenticate"), body=e.read().decode("utf-8", "replace"))
            print(json.dumps(report))
            return 0
    try:
        report["families"] = parse(text, report["format"])
    except Exception as e:  # noqa: BLE001 - the parser raises ValueError and friends
        print(f"metrics driver: the exposition does not parse: {e!r}", file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as exc:  # noqa: BLE001
        print(f"metrics driver: FAIL: {exc!r}", file=sys.stderr)
        sys.exit(4)
