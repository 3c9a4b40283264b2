#!/usr/bin/env python3
"""Parses Outbox's /admin/metrics text with the reference Prometheus parser.

Usage: parse_metrics.py FILE
Prints one line per sample, `name{label="v",...} value`, sorted; exits 1 with a message when
the text does not parse or a family lacks HELP/TYPE.
"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    text = open(sys.argv[1], encoding="utf-8").read()
    families = list(text_string_to_metric_families(text))
    if not families:
        print("no metric families", file=sys.stderr)
        return 1
    lines = []
    for family in families:
        if not family.documentation or family.type == "unknown":
            print(f"{family.name}: missing HELP or TYPE", file=sys.stderr)
            return 1
        if not family.name.startswith("outbox_"):
            print(f"{family.name}: no outbox_ prefix", file=sys.stderr)
            return 1
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            lines.append(f"{sample.name}{{{labels}}} {sample.value}")
    print("\n".join(sorted(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
