"""Where a broker spends its CPU, from Java Flight Recorder (the JDK's own sampler: jcmd and jfr).

A recording is started on a running broker's JVM (`jcmd PID JFR.start`, the `profile` settings:
a Java stack sampled every 10 ms per running thread) and stopped into a file; `summary` reads its
execution samples (`jfr print --json`) and counts them by thread kind (request handlers, network
processors, replica fetchers, ...) and by the Kafka methods on their stacks (inclusive: a sample
counts for every Kafka method it passes through). bench/cluster_cost.py `--profile-broker` records
one window with the exporters and one without, and prints the difference: what serving them costs.

    .venv/bin/python bench/broker_jfr.py FILE.jfr        # the summary of a recording
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from bench.proc_stats import thread_kind

_KAFKA = ("kafka.", "org.apache.kafka.")


def start(pid: int, name: str) -> None:
    subprocess.run(["jcmd", str(pid), "JFR.start", f"name={name}", "settings=profile"], check=True, capture_output=True)


def stop(pid: int, name: str, path: Path) -> Path:
    subprocess.run(["jcmd", str(pid), "JFR.stop", f"name={name}", f"filename={path}"], check=True, capture_output=True)
    return path


def summary(path: Path, depth: int = 64) -> dict[str, Counter[str]]:
    """{"samples": total, "threads": by thread kind, "methods": by Kafka method on the stack (inclusive)}."""
    text = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", str(depth), "--events", "jdk.ExecutionSample", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    events = json.loads(text)["recording"]["events"]
    threads: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    for event in events:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        threads[thread_kind(thread)] += 1
        seen = set()
        for frame in (values.get("stackTrace") or {}).get("frames", []):
            method = frame["method"]
            name = f"{method['type']['name']}.{method['name']}"
            if name.startswith(_KAFKA) and name not in seen:
                seen.add(name)
                methods[name] += 1
    return {"samples": Counter({"all": len(events)}), "threads": threads, "methods": methods}


def difference(with_: dict[str, Counter[str]], without: dict[str, Counter[str]], top: int = 20) -> str:
    """The samples the recording with the exporters has more than the one without, by thread kind and
    by Kafka method, largest first."""
    lines = [f"samples: with {with_['samples']['all']}, without {without['samples']['all']}"]
    for what in ("threads", "methods"):
        more = Counter({k: with_[what][k] - without[what].get(k, 0) for k in with_[what]})
        lines.append(f"{what} (with - without):")
        lines += [f"  {n:+6d}  {k}" for k, n in more.most_common(top) if n > 0]
    return "\n".join(lines)


def main() -> None:
    result = summary(Path(sys.argv[1]))
    print(f"samples {result['samples']['all']}")
    for what in ("threads", "methods"):
        print(f"{what}:")
        for k, n in result[what].most_common(25):
            print(f"  {n:6d}  {k}")


if __name__ == "__main__":
    main()
