"""Where a broker spends its CPU, from async-profiler (Maven Central's tools.profiler:async-profiler).

Its Linux agent is loaded into a running broker's JVM (`jcmd PID JVMTI.agent_load`), samples each
thread every millisecond of CPU it uses (perf events, else a CPU timer) with Java, native and kernel
frames, and writes collapsed stacks, one line per stack with its count. JFR, used before, named the
coordinator's callbacks by their lambda classes and could not say which of them ran a log call.

`summary` counts a recording's samples by thread kind, by the Kafka methods on their stacks
(inclusive: a sample counts for every Kafka method it passes through) and under
`TransactionStateManager.debug`: the CPU the coordinator's DEBUG lines cost the broker (formatting
the line, log4j, the write), measured in place instead of as the difference of two windows' totals,
which at 10 transactions a second a broker moves by more than that cost from one block to the next.

    .venv/bin/python bench/broker_profile.py FILE.collapsed      # the summary of a recording
    .venv/bin/python bench/broker_profile.py --overhead 30,1000  # what the sampling adds to a broker's CPU

`--overhead`: one 4.4.0 broker under a paced load at each rate, windows alternating (ABBA) between
sampled and not: the broker's CPU with the sampling over without, the median of the blocks. The bill
in place divides by the broker alone; measured while it is sampled, that denominator is this much high.
"""

from __future__ import annotations

import subprocess
import sys
import time
import zipfile
from collections import Counter
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from bench.proc_stats import thread_kind
from exporter.pipeline import maven

INTERVAL_MS = 1  # a sample a millisecond of a thread's CPU: samples x INTERVAL_MS = CPU ms (see --overhead)
LOGGER_FRAME = "TransactionStateManager.debug"
# A log4j2 Async appender's thread ("AsyncAppender-<name>"), in a broker whose configuration wraps the
# coordinator's file in one (sidecar_cost.py --logging-config): it formats and writes the lines handed
# to it, which count as the logger's.
_ASYNC_APPENDER = "[AsyncAppender-"
_KAFKA = ("kafka.", "org.apache.kafka.")
_AGENT = "linux-x64/libasyncProfiler.so"


class ProfileError(RuntimeError):
    pass


def agent_library() -> Path:
    """The agent's shared library, from the jar resolved once into the cache."""
    home = maven.cache_root() / "async-profiler"
    if not maven.cached(home):
        maven.resolve(
            home,
            resources.files("bench") / "async-profiler-pom.xml",
            [],
            "async-profiler",
            lambda jars: None if any(j.startswith("async-profiler-") for j in jars) else "no async-profiler jar",
            {"async-profiler": "pom"},
            ProfileError,
        )
    library = home / _AGENT
    if not library.exists():
        jar = next((home / "libs").glob("async-profiler-*.jar"))
        with zipfile.ZipFile(jar) as archive:
            library.parent.mkdir(exist_ok=True)
            library.write_bytes(archive.read(_AGENT))
    return library


def _command(pid: int, command: str) -> None:
    # jcmd splits an unquoted argument at its '=': the agent's options go as one quoted string.
    done = subprocess.run(
        ["jcmd", str(pid), "JVMTI.agent_load", str(agent_library()), f'"{command}"'], capture_output=True, text=True
    )
    if "return code: 0" not in done.stdout:
        raise ProfileError(f"async-profiler `{command}` in JVM {pid}: {done.stdout.strip()} {done.stderr.strip()}")


def start(pid: int) -> None:
    """Starts sampling `pid`'s threads; perf events when the kernel allows them, else a CPU timer."""
    try:
        _command(pid, f"start,event=cpu,interval={INTERVAL_MS}ms,threads")
    except ProfileError:
        _command(pid, f"start,event=itimer,interval={INTERVAL_MS}ms,threads")


def stop(pid: int, path: Path) -> Path:
    _command(pid, f"stop,file={path},collapsed")
    return path


def summary(path: Path) -> dict[str, Counter[str]]:
    """{"samples": total and under the logger, "threads": by thread kind, "methods": by Kafka method
    on the stack (inclusive)}."""
    samples: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        n = int(count)
        samples["all"] += n
        # The first frame is the thread: "[name tid=N]".
        threads[thread_kind(frames[0].strip("[]").rsplit(" tid=", 1)[0])] += n
        names = {frame.replace("/", ".") for frame in frames[1:]}
        if frames[0].startswith(_ASYNC_APPENDER) or any(LOGGER_FRAME in name for name in names):
            samples["logger"] += n
        methods.update(dict.fromkeys((name for name in names if name.startswith(_KAFKA)), n))
    return {"samples": samples, "threads": threads, "methods": methods}


def difference(with_: dict[str, Counter[str]], without: dict[str, Counter[str]], top: int = 20) -> str:
    """The samples one set of recordings has more than another, by thread kind and by Kafka method,
    largest first."""
    lines = [
        f"samples: with {with_['samples']['all']}, without {without['samples']['all']}; "
        f"under {LOGGER_FRAME}: with {with_['samples']['logger']}, without {without['samples']['logger']}"
    ]
    for what in ("threads", "methods"):
        more = Counter({k: with_[what][k] - without[what].get(k, 0) for k in with_[what]})
        lines.append(f"{what} (with - without):")
        lines += [f"  {n:+6d}  {k}" for k, n in more.most_common(top) if n > 0]
    return "\n".join(lines)


def overhead(rates: list[int], blocks: int, seconds: float) -> None:
    import statistics
    import tempfile

    from bench.proc_stats import measure
    from bench.txn_load import DATA_PARTITIONS, DATA_TOPIC, Load, settle_commits_rate
    from txn_workshop.harness.admin import create_internal_topics, create_topic
    from txn_workshop.harness.broker import KafkaBroker

    with tempfile.TemporaryDirectory(prefix="bench-profiler-overhead-") as tmp:
        broker = KafkaBroker("4.4.0", workdir=Path(tmp) / "broker")
        broker.start()
        try:
            create_topic(broker.bootstrap_servers, DATA_TOPIC, partitions=DATA_PARTITIONS)
            create_internal_topics(broker.bootstrap_servers)
            assert broker._proc is not None  # (started)
            pid = broker._proc.pid
            for rate in rates:
                load = Load(broker.bootstrap_servers, rate, 2, 8, f"o{rate}")
                try:
                    time.sleep(30)  # the JIT's warm-up
                    achieved = settle_commits_rate(load)
                    cores: dict[bool, list[float]] = {True: [], False: []}
                    for block in range(blocks):
                        for sampled in (True, False) if block % 2 == 0 else (False, True):
                            if sampled:
                                start(pid)
                            window = measure({"broker": pid}, seconds, load)
                            if sampled:
                                stop(pid, Path(tmp) / f"{rate}-{block}.collapsed")
                            cores[sampled].append(window.cpu["broker"] / window.seconds)
                    on, off = statistics.median(cores[True]), statistics.median(cores[False])
                    ratios = sorted(a / b for a, b in zip(cores[True], cores[False], strict=True))
                    print(
                        f"{rate} transactions/s ({achieved:.0f} achieved): broker {off:.4f} cores, sampled {on:.4f}: "
                        f"+{on / off - 1:.1%} (blocks {ratios[0] - 1:+.1%} to {ratios[-1] - 1:+.1%})",
                        flush=True,
                    )
                finally:
                    load.stop()
        finally:
            broker.stop()


def main() -> None:
    if sys.argv[1] == "--overhead":
        overhead([int(r) for r in sys.argv[2].split(",")], blocks=8, seconds=10.0)
        return
    result = summary(Path(sys.argv[1]))
    print(f"samples {result['samples']['all']}, under {LOGGER_FRAME} {result['samples']['logger']}")
    for what in ("threads", "methods"):
        print(f"{what}:")
        for k, n in result[what].most_common(25):
            print(f"  {n:6d}  {k}")


if __name__ == "__main__":
    main()
