"""bench.broker_profile: a JVM's CPU by thread kind, by Kafka method, and under the coordinator's DEBUG log calls."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from bench import broker_profile

_COLLAPSED = """\
[data-plane-kafka-request-handler-3 tid=101];kafka/server/KafkaApis.handle;kafka/coordinator/transaction/TransactionStateManager.debug;kafka/utils/Logging.debug;org/apache/logging/log4j/spi/AbstractLogger.logMessage 7
[data-plane-kafka-request-handler-0 tid=98];kafka/server/KafkaApis.handle;kafka/server/KafkaApis.handle;kafka/server/ReplicaManager.fetchMessages 5
[C2 CompilerThread0 tid=12];C2Compiler::compile_method 11
"""


def test_a_recording_is_counted_by_thread_kind_kafka_method_and_the_logger(tmp_path: Path) -> None:
    path = tmp_path / "one.collapsed"
    path.write_text(_COLLAPSED)
    result = broker_profile.summary(path)
    assert result["samples"] == {"all": 23, "logger": 7}
    assert result["threads"] == {"data-plane-kafka-request-handler-N": 12, "C2 CompilerThread0": 11}
    # Inclusive, once a sample: a method twice on one stack counts once.
    assert result["methods"]["kafka.server.KafkaApis.handle"] == 12
    assert result["methods"]["kafka.coordinator.transaction.TransactionStateManager.debug"] == 7
    assert "org.apache.logging.log4j.spi.AbstractLogger.logMessage" not in result["methods"]


_JAVA = """\
package kafka.coordinator.transaction;

public class TransactionStateManager {
    static volatile long sink;

    static void debug(long until) {
        while (System.nanoTime() < until) sink += System.nanoTime() % 7;
    }

    public static void main(String[] args) throws Exception {
        Thread handler = new Thread(() -> {
            while (true) debug(System.nanoTime() + 1_000_000);
        }, "data-plane-kafka-request-handler-0");
        handler.setDaemon(true);
        handler.start();
        System.out.println("running");
        System.out.flush();
        Thread.sleep(60_000);
    }
}
"""


@pytest.mark.tools  # javac, and the agent from Maven Central
def test_a_running_jvm_is_sampled_and_its_log_calls_found(tmp_path: Path) -> None:
    source = tmp_path / "src" / "kafka" / "coordinator" / "transaction" / "TransactionStateManager.java"
    source.parent.mkdir(parents=True)
    source.write_text(_JAVA)
    subprocess.run(["javac", "-d", str(tmp_path / "classes"), str(source)], check=True)
    jvm = subprocess.Popen(
        ["java", "-cp", str(tmp_path / "classes"), "kafka.coordinator.transaction.TransactionStateManager"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert jvm.stdout is not None and jvm.stdout.readline().strip() == "running"
        broker_profile.start(jvm.pid)
        time.sleep(2)
        result = broker_profile.summary(broker_profile.stop(jvm.pid, tmp_path / "jvm.collapsed"))
    finally:
        jvm.kill()
        jvm.wait()
    # About a core for 2 s, a sample a millisecond: most of them in the spinning thread's debug().
    assert result["samples"]["logger"] > 500, result["samples"]
    assert result["threads"].most_common(1)[0][0] == "data-plane-kafka-request-handler-N", result["threads"]
