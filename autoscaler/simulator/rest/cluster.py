"""The cluster-level endpoints: overview, web config, JobManager configuration, and the TaskManagers.

The configuration reports the adaptive scheduler and the spec's cooldown, fetch interval and slots
(overlaid with the spec's and the job's own entries); TaskManager entries and details follow
how the engine places slots on TaskManagers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoscaler.simulator.engine import MetricValue, SimCluster
from autoscaler.simulator.rest.errors import HANDLER_EXCEPTION, HttpError, stringified
from autoscaler.simulator.rest.view import Params, Response, View

__all__ = [
    "FLINK_COMMIT",
    "FLINK_VERSION",
    "config",
    "job_jobmanager_config",
    "jobmanager_config",
    "overview",
    "taskmanager_details",
    "taskmanagers",
]

FLINK_VERSION = "2.3.0"
FLINK_COMMIT = "c0f8d1a"
REFRESH_INTERVAL_MS = 3000


def _flink_duration(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _cluster_config(cluster: SimCluster) -> dict[str, str]:
    spec = cluster.spec
    config = {
        "jobmanager.scheduler": "adaptive",
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": _flink_duration(
            spec.cooldown_after_rescaling_s
        ),
        "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "0s",
        "jobmanager.execution.failover-strategy": "region",
        "jobmanager.rpc.address": "127.0.0.1",
        "jobmanager.rpc.port": "6123",
        "taskmanager.numberOfTaskSlots": str(spec.slots),
        "parallelism.default": "1",
        "metrics.fetcher.update-interval": str(round(spec.metric_fetch_interval_s * 1000)),
        "web.refresh-interval": str(REFRESH_INTERVAL_MS),
        "execution.checkpointing.interval": "2s",
        "execution.checkpointing.unaligned.enabled": "true",
        "rest.address": "127.0.0.1",
    }
    config.update(spec.config)
    return config


def _key_values(config: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"key": key, "value": value} for key, value in config.items()]


def overview(view: View, *_: Any) -> Response:
    jobs = view.cluster.jobs()
    return 200, {
        "taskmanagers": view.cluster.spec.taskmanagers,
        "slots-total": view.cluster.slots_total,
        "slots-available": view.cluster.slots_total - view.cluster.slots_used(),
        "jobs-running": sum(1 for j in jobs if j.state in ("RUNNING", "RESTARTING")),
        "jobs-finished": sum(1 for j in jobs if j.state == "FINISHED"),
        "jobs-cancelled": sum(1 for j in jobs if j.state == "CANCELED"),
        "jobs-failed": sum(1 for j in jobs if j.state == "FAILED"),
        "flink-version": FLINK_VERSION,
        "flink-commit": FLINK_COMMIT,
    }


def config(view: View, *_: Any) -> Response:
    return 200, {
        "refresh-interval": REFRESH_INTERVAL_MS,
        "timezone-name": "Coordinated Universal Time",
        "timezone-offset": 0,
        "flink-version": FLINK_VERSION,
        "flink-revision": f"{FLINK_COMMIT} @ simulated",
        "features": {"web-submit": False, "web-cancel": True, "web-rescale": True, "web-history": False},
    }


def job_jobmanager_config(view: View, params: Params, *_: Any) -> Response:
    """In a session cluster, the cluster's configuration: a job's own options are not in it (Flink 2.3,
    the e2e cluster); they are its global job parameters (``job_config``)."""
    view.job(params["jobid"])  # 404 for an unknown job
    return 200, _key_values(_cluster_config(view.cluster))


def jobmanager_config(view: View, *_: Any) -> Response:
    return 200, _key_values(_cluster_config(view.cluster))


def _taskmanager_entries(view: View) -> list[dict[str, Any]]:
    spec = view.cluster.spec
    used = view.cluster.slots_used_per_taskmanager()
    tasks = view.cluster.tasks_per_taskmanager()
    entries = []
    for i, tm_id in enumerate(view.cluster.taskmanager_ids):
        free = spec.slots - used[i]
        port = int(tm_id.split(":")[1].split("-")[0])

        def resource(share: float) -> dict[str, Any]:
            return {
                "cpuCores": float(spec.slots) * share,
                "taskHeapMemory": int(287 * share),
                "taskOffHeapMemory": 0,
                "managedMemory": int(435 * share),
                "networkMemory": int(108 * share),
                "extendedResources": {},
            }

        entries.append(
            {
                "id": tm_id,
                "path": f"pekko.tcp://flink@127.0.0.1:{port}/user/rpc/taskmanager_{i}",
                "dataPort": 35861 + i,
                "jmxPort": -1,
                "timeSinceLastHeartbeat": view.now,
                "slotsNumber": spec.slots,
                "freeSlots": free,
                "assignedTasks": tasks[i],
                "totalResource": resource(1.0),
                "freeResource": resource(free / spec.slots),
                "hardware": {
                    "cpuCores": 2,
                    "physicalMemory": 25_276_502_016,
                    "freeMemory": 436_207_616,
                    "managedMemory": 456_340_282,
                },
                "memoryConfiguration": {
                    "frameworkHeap": 134_217_728,
                    "taskHeap": 301_989_880,
                    "frameworkOffHeap": 134_217_728,
                    "taskOffHeap": 0,
                    "networkMemory": 114_085_070,
                    "managedMemory": 456_340_282,
                    "jvmMetaspace": 268_435_456,
                    "jvmOverhead": 201_326_592,
                    "totalFlinkMemory": 1_140_850_688,
                    "totalProcessMemory": 1_610_612_736,
                },
            }
        )
    return entries


def taskmanagers(view: View, *_: Any) -> Response:
    return 200, {"taskmanagers": _taskmanager_entries(view)}


def taskmanager_details(view: View, params: Params, *_: Any) -> Response:
    tm_id = params["taskmanagerid"]
    for i, entry in enumerate(_taskmanager_entries(view)):
        if entry["id"] != tm_id:
            continue
        metrics = view.store.taskmanagers.get(tm_id, {})
        allocated = []
        for job in view.cluster.jobs():
            on_tm = [k for k in range(job.slots_taken) if view.taskmanager_of(job, k) == i]
            if on_tm:
                allocated.append(
                    {
                        "jobId": job.job_id,
                        "resource": {
                            "cpuCores": float(len(on_tm)),
                            "taskHeapMemory": 35 * len(on_tm),
                            "taskOffHeapMemory": 0,
                            "managedMemory": 54 * len(on_tm),
                            "networkMemory": 13 * len(on_tm),
                            "extendedResources": {},
                        },
                        "assignedTasks": sum(1 for k in on_tm for p in job.parallelism.values() if p > k),
                    }
                )

        def number(key: str, metrics: Mapping[str, MetricValue] = metrics) -> int:
            value = metrics.get(key, 0)
            return int(value) if isinstance(value, int | float) else 0

        detail = dict(entry)
        detail["allocatedSlots"] = allocated
        detail["metrics"] = {
            "heapUsed": number("Status.JVM.Memory.Heap.Used"),
            "heapCommitted": number("Status.JVM.Memory.Heap.Committed"),
            "heapMax": number("Status.JVM.Memory.Heap.Max"),
            "nonHeapUsed": number("Status.JVM.Memory.NonHeap.Used"),
            "nonHeapCommitted": number("Status.JVM.Memory.NonHeap.Committed"),
            "nonHeapMax": number("Status.JVM.Memory.NonHeap.Max"),
            "directCount": number("Status.JVM.Memory.Direct.Count"),
            "directUsed": number("Status.JVM.Memory.Direct.MemoryUsed"),
            "directMax": number("Status.JVM.Memory.Direct.TotalCapacity"),
            "mappedCount": number("Status.JVM.Memory.Mapped.Count"),
            "mappedUsed": number("Status.JVM.Memory.Mapped.MemoryUsed"),
            "mappedMax": number("Status.JVM.Memory.Mapped.TotalCapacity"),
            "nettyShuffleMemorySegmentsAvailable": number("Status.Shuffle.Netty.AvailableMemorySegments"),
            "nettyShuffleMemorySegmentsUsed": number("Status.Shuffle.Netty.UsedMemorySegments"),
            "nettyShuffleMemorySegmentsTotal": number("Status.Shuffle.Netty.TotalMemorySegments"),
            "nettyShuffleMemoryAvailable": number("Status.Shuffle.Netty.AvailableMemory"),
            "nettyShuffleMemoryUsed": number("Status.Shuffle.Netty.UsedMemory"),
            "nettyShuffleMemoryTotal": number("Status.Shuffle.Netty.TotalMemory"),
            "garbageCollectors": [
                {
                    "name": gc,
                    "count": number(f"Status.JVM.GarbageCollector.{gc}.Count"),
                    "time": number(f"Status.JVM.GarbageCollector.{gc}.Time"),
                }
                for gc in ("All", "G1_Young_Generation", "G1_Old_Generation")
            ],
        }
        return 200, detail
    raise HttpError(
        404,
        stringified(
            HANDLER_EXCEPTION,
            f"Could not find TaskExecutor {tm_id}.",
            "taskmanager.TaskManagerDetailsHandler.handleRequest:103",
        ),
    )
