"""The one place that knows Flink's metric names.

Names are matched against what the REST "list names" endpoints return, never guessed: Flink answers
``[]`` to an aggregated query as soon as one requested name is unknown, so a query must only carry
names that were listed. Predicates follow the reference autoscaler's ``FlinkMetric`` table.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

__all__ = ["FlinkMetric", "NamePredicate", "matching", "source_partitions"]

_SRC = "Source__"


@dataclass(frozen=True, slots=True)
class NamePredicate:
    """An exact name, or a prefix/suffix pair (operator-scoped names start with the operator's name)."""

    exact: str | None = None
    prefix: str = ""
    suffix: str = ""

    def __call__(self, name: str) -> bool:
        if self.exact is not None:
            return name == self.exact
        return (
            name.startswith(self.prefix)
            and name.endswith(self.suffix)
            and len(name) > len(self.prefix) + len(self.suffix)
        )


def _exact(name: str) -> NamePredicate:
    return NamePredicate(exact=name)


class FlinkMetric(Enum):
    """Metrics the autoscaler reads; each member's value is the predicate over REST metric names."""

    # Task level, every vertex.
    BUSY_TIME_PER_SEC = _exact("busyTimeMsPerSecond")
    BACKPRESSURE_TIME_PER_SEC = _exact("backPressuredTimeMsPerSecond")
    NUM_RECORDS_IN_PER_SEC = _exact("numRecordsInPerSecond")
    ACCUMULATED_BUSY_TIME = _exact(
        "accumulateBusyTimeMs"
    )  # cumulative; its rate is busy ms/s without a 60 s lag
    # Source operators (operator name with ' ' and ':' replaced by '_', hence the prefix).
    SOURCE_TASK_NUM_RECORDS_IN_PER_SEC = NamePredicate(prefix=_SRC, suffix=".numRecordsInPerSecond")
    SOURCE_TASK_NUM_RECORDS_IN = NamePredicate(prefix=_SRC, suffix=".numRecordsIn")
    SOURCE_TASK_NUM_RECORDS_OUT = NamePredicate(prefix=_SRC, suffix=".numRecordsOut")
    SOURCE_TASK_NUM_RECORDS_OUT_PER_SEC = NamePredicate(prefix=_SRC, suffix=".numRecordsOutPerSecond")
    PENDING_RECORDS = NamePredicate(suffix=".pendingRecords")
    # TaskManagers.
    HEAP_MEMORY_MAX = _exact("Status.JVM.Memory.Heap.Max")
    HEAP_MEMORY_USED = _exact("Status.JVM.Memory.Heap.Used")
    MANAGED_MEMORY_USED = _exact("Status.Flink.Memory.Managed.Used")
    METASPACE_MEMORY_USED = _exact("Status.JVM.Memory.Metaspace.Used")
    TOTAL_GC_TIME_PER_SEC = _exact("Status.JVM.GarbageCollector.All.TimeMsPerSecond")
    CPU_LOAD = _exact("Status.JVM.CPU.Load")
    # JobManager.
    NUM_TASK_SLOTS_TOTAL = _exact("taskSlotsTotal")
    NUM_TASK_SLOTS_AVAILABLE = _exact("taskSlotsAvailable")

    def matches(self, name: str) -> bool:
        predicate: NamePredicate = self.value
        return predicate(name)


def matching(metric: FlinkMetric, names: Iterable[str]) -> list[str]:
    """Every listed name the metric matches, in listing order, without duplicates."""
    return list(dict.fromkeys(n for n in names if metric.matches(n)))


# <prefix>[.kafkaCluster.<c>].KafkaSourceReader.topic.<t>.partition.<n>.currentOffset; topics may hold dots,
# so the partition number anchors the end and the cluster is the shortest run before KafkaSourceReader.
_KAFKA_PARTITION = re.compile(
    r"^.*?(?:\.kafkaCluster\.(?P<cluster>.+?))?\.KafkaSourceReader\.topic\.(?P<topic>.+)"
    r"\.partition\.(?P<partition>\d+)\.currentOffset$"
)
# <prefix>.PulsarConsumer.<t>-partition-<n>.<consumer...>.numMsgsReceived
_PULSAR_PARTITION = re.compile(
    r"^.*?\.PulsarConsumer\.(?P<topic>.+)-partition-(?P<partition>\d+)\..*\.numMsgsReceived$"
)


def source_partitions(names: Iterable[str]) -> int:
    """Distinct (cluster, topic, partition) read by a Kafka or Pulsar source, from its metric names.

    0 when the source is neither (or has not reported its partitions yet). Counted once per listing:
    a source's names are the same tick after tick, and matching hundreds of them is not free.
    """
    return _source_partitions(tuple(names))


@functools.lru_cache(maxsize=4096)
def _source_partitions(names: tuple[str, ...]) -> int:
    seen: set[tuple[str, str, str, int]] = set()
    for name in names:
        if m := _KAFKA_PARTITION.match(name):
            seen.add(("kafka", m.group("cluster") or "", m.group("topic"), int(m.group("partition"))))
        elif m := _PULSAR_PARTITION.match(name):
            seen.add(("pulsar", "", m.group("topic"), int(m.group("partition"))))
    return len(seen)
