"""`txn-exporter demo` as a real process: what it checks before starting, what it leaves behind, what
it prints through a hold of markers (each message true when printed, in the order things happen), the
clock its appends are timed on, and a Ctrl-C, to its whole process group as a terminal sends it,
during a hold (broker 2 stopped) that leaves no process behind. How long that stop takes is measured
by bench/demo_stop.py (docs/benchmarks.md), not here.

The demo's work dir is a temporary directory: TMPDIR points it into the test's own directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.codec.states import TransactionState
from exporter.commands.transactions import DEFAULT_URL
from tests.view import chromium
from txn_workshop.demo import COORDINATOR_LOG, FREE_SECONDS, HOLD_SECONDS, LISTEN
from txn_workshop.harness.jars import TOOL_SCRIPTS
from txn_workshop.harness.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def _demo(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", "demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )


def test_a_port_in_use_stops_the_demo_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _demo(tmp_path, "--listen", f"127.0.0.1:{port}")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"txn-exporter demo: cannot listen on 127.0.0.1:{port}: address already in use "
        "(--listen HOST:PORT picks another)\n"
    )
    assert proc.stdout == ""  # no "Starting two Kafka brokers"
    assert list(tmp_path.iterdir()) == []  # no work dir, so no broker either


@pytest.mark.kafka
def test_the_work_dir_is_removed_on_exit(tmp_path: Path, kafka_broker_factory) -> None:
    kafka_broker_factory.make_room()  # the demo's two JVMs, beside at most one of the session's
    proc = _demo(tmp_path, "--duration", "1", "--listen", f"127.0.0.1:{free_port()}", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(tmp_path.glob("txn-exporter-demo-*")) == [], proc.stdout
    assert "removed on exit; --keep-work-dir keeps it" in proc.stdout


HOLDING = re.compile(
    re.escape(
        "... holding the markers of demo-held's commit and the coordinator's abort of demo-held-timeout "
        f"(timed out) back for {HOLD_SECONDS} s more (the oldest pending for "
    )
    + r"(\d+) s already\): pending markers 2, marker retries climbing$"
)
RELEASING = re.compile(
    r"^\.\.\. releasing the held markers \(the oldest held (\d+) s\): pending markers drop back to 0 within seconds$"
)
SUMMARY = re.compile(
    r"^\[\d\d:\d\d:\d\d\] since start: appends PREPARE_COMMIT (\d+), PREPARE_ABORT (\d+) "
    r"\(p99 of the last 5 min: (?:\d+ ms|-) of (\d+), (?:\d+ ms|-) of (\d+)\), marker retries (\d+) "
    r"\| now: pending markers (\d+)(?:, the oldest for \d+\.\d s)?$"
)
LOGGED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


def _summary(line: str) -> tuple[int, int, int, int] | None:
    """A summary line's PREPARE_COMMIT and PREPARE_ABORT appends, marker retries, pending markers."""
    match = SUMMARY.match(line)
    return None if match is None else (int(match[1]), int(match[2]), int(match[5]), int(match[6]))


def _index(lines: list[str], pattern: re.Pattern[str]) -> int | None:
    return next((i for i, line in enumerate(lines) if pattern.match(line)), None)


def _released(lines: list[str]) -> bool:
    """The release announced, and a summary after it shows no pending markers."""
    released = _index(lines, RELEASING)
    if released is None:
        return False
    after = [_summary(line) for line in lines[released + 1 :]]
    return any(summary is not None and summary[3] == 0 for summary in after)


def _shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def _processes() -> dict[int, tuple[int, str]]:
    """Every live process: pid -> (parent pid, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():  # self, thread-self, sys...
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):  # not a process, or gone meanwhile
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":  # a zombie has stopped: only its parent's wait is missing
            found[int(entry.name)] = (int(parent), cmdline)
    return found


def _family(pid: int) -> dict[int, str]:
    """`pid`'s descendants (brokers included: their JVMs are its children, in process groups of their
    own): pid -> command line."""
    processes = _processes()
    family: dict[int, str] = {}
    parents = [pid]
    while parents:
        parent = parents.pop()
        for child, (its_parent, cmdline) in processes.items():
            if its_parent == parent and child not in family:
                family[child] = cmdline
                parents.append(child)
    return family


def _left_behind(family: dict[int, str], work_dir: Path) -> list[str]:
    """Which of `family` still run, and any process naming `work_dir` (a broker started after the
    family was listed), once that is settled: a child told to stop by its parent's exit (die_with_parent)
    may take a moment to go. Waited for up to 30 s, a bound, not a speed asserted."""
    deadline = time.monotonic() + 30
    while True:
        processes = _processes()
        left = [
            cmdline for pid, (_, cmdline) in processes.items() if family.get(pid) == cmdline or str(work_dir) in cmdline
        ]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _scrape(listen: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics: (sample name, its labels) -> value."""
    with urllib.request.urlopen(f"http://{listen}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _view(listen: str) -> dict:
    request = urllib.request.Request(f"http://{listen}/transactions", headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def _commands(view: dict) -> list[str]:
    """The commands of every diagnosed row of a transactions view."""
    return [c["command"] for row in view["transactions"] for c in (row.get("diagnosis") or {}).get("commands", [])]


def _read_only(command: str) -> bool:
    """A command of the diagnosis that only looks (its confirm steps), not one that changes the cluster."""
    return not any(word in command.split() for word in ("--alter", "abort", "--execute", "--delete"))


@pytest.fixture(scope="module")
def through_a_hold(tmp_path_factory, kafka_broker_factory) -> tuple[list[str], str, Path, dict]:
    """The demo (work dir kept) until it released its first hold and a summary after that shows 0
    pending, then on to its second hold, and Ctrl-C there, to its process group as a terminal sends
    it: its stdout lines, its stderr, the test's TMPDIR, and what ran beside it: during the first
    hold, the transactions view (JSON) and `txn-exporter transactions` as the banner shows it; after
    the release, the banner's Kafka tool command and the view's read-only commands, each in a shell
    with the banner's `export PATH=...` first, as a user would copy them; during the second hold,
    /metrics, the demo's processes, and which of them were left once it had exited."""
    tmp_path = tmp_path_factory.mktemp("demo")
    kafka_broker_factory.make_room()
    listen = f"127.0.0.1:{free_port()}"
    ran: dict = {}
    demo = subprocess.Popen(
        [sys.executable, "-m", "exporter", "demo", "--listen", listen, "--keep-work-dir"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, which the Ctrl-C below is sent to
    )
    stdout, stderr = demo.stdout, demo.stderr
    assert stdout is not None and stderr is not None
    lines: list[str] = []
    errors: list[str] = []
    readers = [
        threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in stdout), daemon=True),
        threading.Thread(target=lambda: errors.extend(stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 300
    try:
        while not _released(list(lines)):
            assert demo.poll() is None and time.monotonic() < deadline, "\n".join(lines) + "".join(errors)
            if (
                "view" not in ran
                and _index(list(lines), HOLDING) is not None
                and _index(list(lines), RELEASING) is None
            ):
                view = _view(listen)  # asked until a held row has its diagnosis (stuck, or its markers erring)
                if _commands(view):
                    ran["view"] = view
                    request = urllib.request.Request(f"http://{listen}/transactions", headers={"Accept": "text/html"})
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        ran["page"] = answer.read().decode()
                if "table" not in ran:
                    command = next(line.split("in a terminal: ", 1)[1] for line in lines if "in a terminal: " in line)
                    ran["table"] = _shell(
                        f"{shlex.quote(sys.executable)} -m exporter {command.removeprefix('txn-exporter ')}"
                    )
            time.sleep(0.5)
        export = next(line.strip() for line in lines if line.strip().startswith("export PATH="))
        example = lines[lines.index(next(line for line in lines if line.strip() == export)) + 1].strip()
        ran["example"] = (example, _shell(f"{export}; {example}"))
        commands = _commands(ran.get("view", {"transactions": []}))
        ran["commands"] = {}
        for command in commands:
            tool = command.split()[0]
            if _read_only(command) and tool not in ran["commands"]:
                ran["commands"][tool] = (command, _shell(f"{export}; {command}"))
        # The next hold (broker 2 stopped, markers held back), where a Ctrl-C used to take 14 s.
        while sum(map(bool, map(HOLDING.match, list(lines)))) < 2:
            assert demo.poll() is None and time.monotonic() < deadline + 120, "\n".join(lines) + "".join(errors)
            time.sleep(0.5)
        ran["metrics"] = _scrape(listen)
        ran["family"] = _family(demo.pid)
        os.killpg(demo.pid, signal.SIGINT)
        assert demo.wait(180) == 0, "\n".join(lines) + "".join(errors)
        ran["left"] = _left_behind(ran["family"], tmp_path)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    for reader in readers:
        reader.join(10)
    return lines, "".join(errors), tmp_path, ran


def test_the_work_dir_is_kept_with_keep_work_dir(through_a_hold) -> None:
    lines, _, tmp_path, _ = through_a_hold
    (work_dir,) = tmp_path.glob("txn-exporter-demo-*")
    assert f"Brokers' data and logs kept in {work_dir}" in lines
    assert (work_dir / "broker-1" / "logs" / "server.log").stat().st_size > 0


CLOCK_INFO = "txn_exporter_append_latency_clock_info"


def test_every_append_is_timed_on_the_coordinators_clock_from_its_own_file(through_a_hold) -> None:
    """As deploy/ recommends: the coordinator's TransactionStateManager at DEBUG in txn-coordinator.log,
    server.log at INFO, and the exporter following that file: by the second hold, every target state
    has appends, each timed on the coordinator's clock (none by the fetch, none left untimed)."""
    lines, _, tmp_path, ran = through_a_hold
    metrics = ran["metrics"]
    in_force = [labels for (name, labels), value in metrics.items() if name == CLOCK_INFO and value == 1]
    assert in_force == [(("clock", "coordinator"),)], in_force
    for state in TransactionState:
        if state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
            continue  # never written by a broker
        labels = (("target_state", state.name),)
        count = metrics["kafka_transaction_state_log_append_latency_seconds_count", labels]
        timed = {
            clock: metrics["txn_exporter_append_latency_transitions_total", (("clock", clock), *labels)]
            for clock in ("coordinator", "fetch", "untimed")
        }
        assert count > 0 and timed == {"coordinator": count, "fetch": 0, "untimed": 0}, (state.name, count, timed)
    (work_dir,) = tmp_path.glob("txn-exporter-demo-*")
    coordinator_log = work_dir / "broker-1" / "logs" / COORDINATOR_LOG
    assert any(line.strip() == str(coordinator_log) for line in lines)  # the banner names it
    assert " succeeded (kafka.coordinator.transaction.TransactionStateManager)" in coordinator_log.read_text()
    for broker in ("broker-1", "broker-2"):
        server_log = (work_dir / broker / "logs" / "server.log").read_text()
        assert " INFO " in server_log and " DEBUG " not in server_log, broker


def test_ctrl_c_during_a_hold_stops_every_process_brokers_included(through_a_hold) -> None:
    """Ctrl-C to the demo's process group while broker 2 is stopped for a hold: the demo exits with 0
    (the fixture checks), and no process it started is left, broker 1's JVM included."""
    _, stderr, tmp_path, ran = through_a_hold
    (work_dir,) = tmp_path.glob("txn-exporter-demo-*")
    brokers = [cmdline for cmdline in ran["family"].values() if "kafka.Kafka" in cmdline]
    assert len(brokers) == 1 and str(work_dir / "broker-1") in brokers[0], brokers  # broker 2 was stopped
    assert ran["left"] == [], ran["left"]
    assert "Traceback" not in stderr, stderr


def test_the_demos_brokers_log_the_coordinator_as_deploy_recommends() -> None:
    """The demo's logging configurations (workshop/txn_workshop/demo_logging/) are deploy/broker-logging/'s
    for what --broker-log reads: the same loggers and levels, the coordinator's file by the same name
    and layout. Only the bounds differ: no console, and both files roll by size at the harness's bounds."""
    sizes = ("size.size", "strategy.max", "MaxFileSize", "MaxBackupIndex")
    for name in ("log4j.properties", "log4j2.properties"):
        deploy = _properties(ROOT / "deploy" / "broker-logging" / name)
        demo = _properties(ROOT / "workshop" / "txn_workshop" / "demo_logging" / name)
        coordinator = {
            key: value
            for key, value in deploy.items()
            if key.startswith(("logger.", "log4j.logger.", "appender.txn.", "log4j.appender.txnCoordinatorAppender"))
            and not key.endswith(sizes)
        }
        assert len(coordinator) >= 8 and {key: demo.get(key) for key in coordinator} == coordinator, name
        assert not any("Console" in value for value in demo.values()), name
        bounds = {value.replace("sys:", "") for key, value in demo.items() if key.endswith(sizes)}
        assert bounds == {"${txn.log.max.bytes}", "${txn.log.backups}"}, (name, bounds)
        assert not any("TimeBased" in value or "DailyRolling" in value for value in demo.values()), name


def _properties(path: Path) -> dict[str, str]:
    """A .properties file's keys and values (log4j's and log4j2's: no continuation lines)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_a_hold_is_announced_once_both_transactions_are_pending_and_released_before_any_summary_shows_0(
    through_a_hold,
) -> None:
    """The hold holds two transactions (a commit, a timed-out producer's abort), says so, and says it
    once the exporter sees them both; the summaries show both pending until the release is announced."""
    lines, _, _, _ = through_a_hold
    holding, releasing = _index(lines, HOLDING), _index(lines, RELEASING)
    assert holding is not None and releasing is not None, lines
    # One hold line, then one release line (the fixture runs Kafka's tools after it: a next hold may begin).
    assert sum(map(bool, map(HOLDING.match, lines[:releasing]))) == 1
    nxt = _index(lines[releasing + 1 :], HOLDING)
    assert _index(lines[releasing + 1 : None if nxt is None else releasing + 1 + nxt], RELEASING) is None
    held = [_summary(line) for line in lines[holding + 1 : releasing]]
    assert held and all(summary is not None and summary[3] == 2 for summary in held), lines
    retries = [summary[2] for summary in held if summary]
    assert retries == sorted(retries) and (len(retries) == 1 or retries[-1] > retries[0]), lines
    # Before the line, the exporter may have seen one of the two already (the line waits for both).
    before = [summary for summary in map(_summary, lines[:holding]) if summary]
    assert all(summary[3] <= 2 for summary in before), lines
    # What the lines say of the oldest's wait is so: HOLD_SECONDS more than when the hold began.
    already = int(HOLDING.match(lines[holding])[1])  # type: ignore[index]
    held_for = int(RELEASING.match(lines[releasing])[1])  # type: ignore[index]
    assert already + HOLD_SECONDS - 1 <= held_for <= already + HOLD_SECONDS + 5, (already, held_for)


def test_the_summaries_are_totals_since_the_start_then_what_is_now(through_a_hold) -> None:
    lines, _, _, _ = through_a_hold
    summaries = [summary for summary in map(_summary, lines) if summary]
    assert len(summaries) >= 3
    for column in (0, 1, 2):  # running totals only grow
        totals = [summary[column] for summary in summaries]
        assert totals == sorted(totals), (column, totals)
    words = " ".join(" ".join(lines).split())
    assert f"after every {FREE_SECONDS} s of that, the markers of two transactions are held back" in words
    assert f"once both are pending, {HOLD_SECONDS} s more, so the oldest waits longer than {HOLD_SECONDS} s" in words
    assert "Each summary line: totals since the start, then what is true now" in words
    # Each p99 with the count of samples it is of (under 100, about their maximum).
    counts = [(int(m[3]), int(m[4])) for m in map(SUMMARY.match, lines) if m]
    assert counts[-1][0] > 0 and "with fewer than 100, the p99 is about their maximum" in words


def test_no_client_line_reaches_the_terminal_raw(through_a_hold) -> None:
    """librdkafka's lines (its producers', its child processes') go through logging, whose level the
    demo sets: ERROR for the harness's clients. A bare line would be one of theirs."""
    lines, stderr, _, _ = through_a_hold
    assert not any("Failed to acquire transactional PID" in line for line in [*lines, *stderr.splitlines()])
    assert all(LOGGED.match(line) for line in stderr.splitlines() if line and not line.startswith(" ")), stderr


def test_the_holds_warning_is_in_plain_words_and_the_banner_announces_it(through_a_hold) -> None:
    """Stopping broker 2 for the hold makes the exporter's client warn: the line names the broker and
    what failed, in at most 25 words, without librdkafka's codes; the banner shows that line."""
    lines, stderr, _, _ = through_a_hold
    warned = [
        line.split(": ", 1)[1] for line in stderr.splitlines() if " WARNING exporter.sources.topic_tail: " in line
    ]
    assert any(w.startswith("cannot connect to Kafka broker 2 at 127.0.0.1:") for w in warned), stderr
    for warning in warned:
        assert len(warning.split()) <= 25 and not re.search(r"\b_[A-Z_]+\b", warning), warning
    words = " ".join(" ".join(lines).split())
    assert "At each hold the exporter warns, on stderr, that broker 2 is gone; that is the hold, not a fault" in words
    assert "WARNING exporter.sources.topic_tail: cannot connect to Kafka broker 2 at 127.0.0.1:" in words


def test_the_banners_commands_run_as_printed(through_a_hold) -> None:
    """`txn-exporter transactions` with no --url on the default port (here --url, the port another),
    Kafka's tools through the scripts the banner puts on PATH, and the diagnosis's read-only commands
    of the held transactions, copied as the page shows them."""
    lines, _, _, ran = through_a_hold
    assert any(line.strip().startswith("in a terminal: txn-exporter transactions --url http://") for line in lines)
    table = ran["table"]
    assert table.returncode == 0 and "demo-held" in table.stdout, table.stdout + table.stderr
    example, proc = ran["example"]
    assert example.startswith("kafka-transactions.sh --bootstrap-server 127.0.0.1:") and example.endswith(" list")
    assert proc.returncode == 0 and "demo-held" in proc.stdout, proc.stdout + proc.stderr
    assert {"kafka-transactions.sh", "kafka-topics.sh", "kafka-configs.sh"} <= set(ran["commands"]), ran["commands"]
    assert set(ran["commands"]) <= set(TOOL_SCRIPTS)
    for command, proc in ran["commands"].values():
        assert proc.returncode == 0 and proc.stdout.strip(), (command, proc.stdout, proc.stderr)


# _explain's arguments after the metrics URL: the brokers, the tools' dir, the version, the coordinator's log.
EXPLAINED = (
    "127.0.0.1:9092",
    "127.0.0.1:9093",
    Path("/tmp/demo/bin"),
    "4.4.0",
    Path("/tmp/demo/broker-1/logs") / COORDINATOR_LOG,
)


def test_the_banner_says_which_clock_times_the_appends_and_why(capsys) -> None:
    from txn_workshop.demo import _explain

    _explain(f"http://{LISTEN}/metrics", *EXPLAINED)
    words = " ".join(capsys.readouterr().out.split())
    assert (
        "The clock: every append latency here is the coordinator's own, exact to the ms "
        '(txn_exporter_append_latency_clock_info{clock="coordinator"} is 1), as deploy/ recommends' in words
    )
    assert "TransactionStateManager at DEBUG" in words and f"/tmp/demo/broker-1/logs/{COORDINATOR_LOG}" in words
    assert "record timestamp -> visible to the exporter" not in words  # the fetch's clock, no more


def test_the_banner_names_the_transactions_command_without_url_on_the_default_port(capsys) -> None:
    from txn_workshop.demo import _explain

    assert f"http://{LISTEN}" == DEFAULT_URL
    _explain(f"http://{LISTEN}/metrics", *EXPLAINED)
    out = capsys.readouterr().out
    assert "in a terminal: txn-exporter transactions\n" in out
    assert 'export PATH="/tmp/demo/bin:$PATH"' in out and "kafka/4.3.1/libs" in out


def test_the_help_says_when_markers_are_held() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "demo", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    words = " ".join(proc.stdout.split())
    assert "now and then" not in words
    assert (
        f"after every {FREE_SECONDS} s of those, the markers of two transactions held back until both are pending, "
        f"then for {HOLD_SECONDS} s more" in words
    )


def test_what_the_newcomer_reads_says_that_kafka_resends_markers_without_backoff(capsys) -> None:
    """A hold counts hundreds of thousands of marker retries: the demo's glossary and the runbook say
    why (TransactionMarkerRequestCompletionHandler re-enqueues at once), and the README's caption no
    longer says the demo does not follow the broker log (it does: --broker-log on the coordinator)."""
    from txn_workshop.demo import _explain

    _explain("http://127.0.0.1:9464/metrics", *EXPLAINED)
    assert "Kafka retries markers without backoff" in capsys.readouterr().out
    runbooks = (ROOT / "alerts" / "runbooks.md").read_text()
    section = runbooks.split("## KafkaTransactionMarkerRetriesSustained", 1)[1].split("\n## ", 1)[0]
    assert "with no backoff at all" in section and "TransactionMarkerRequestCompletionHandler" in section
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "the demo does not follow the broker's log" not in readme
    assert "read from the coordinator's log that the demo follows with `--broker-log`" in readme


@pytest.mark.parametrize("width", [1280, 375])
def test_the_transactions_page_of_a_hold_fits_a_laptop_and_a_phone(through_a_hold, width, tmp_path) -> None:
    """The page as the demo served it during the hold, its stuck rows diagnosed, laid out by Debian's
    chromium: no sideways scrolling; long error names and commands wrap."""
    _, _, _, ran = through_a_hold
    page = ran["page"]
    assert "demo-held" in page and 'data-label="Diagnosis"' in page and "kafka-configs.sh" in page
    scroll, client = chromium.widths(page, width, tmp_path)
    assert width * 0.8 < client <= width and scroll <= client, (scroll, client)
