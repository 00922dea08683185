"""TaskManager memory advice (``autoscaler.memory_advice``): the reference's memory tuning, checked
against the worked example its own tests use (30 GiB TaskManagers of 5 slots, v1 50 -> 25 feeding v2
50 -> 10 over a REBALANCE edge), byte for byte."""

from __future__ import annotations

import math

import pytest

from autoscaler.memory_advice import NetworkConfig, advise_memory, memory_size_text, network_bytes
from autoscaler.model import Edge, JobTopology, TaskManagerMemory, VertexInfo

MIB, GIB = 1 << 20, 1 << 30
# Flink's derivation for taskmanager.memory.process.size 30 gb with every other option at its default.
SPEC = TaskManagerMemory(
    process=30 * GIB,
    framework_heap=128 * MIB,
    task_heap=17_179_869_000,
    framework_off_heap=128 * MIB,
    task_off_heap=0,
    network=1 * GIB,
    managed=12_348_031_160,
    metaspace=256 * MIB,
    overhead=1 * GIB,
)
TOPOLOGY = JobTopology.build(
    [VertexInfo("v1", "v1", 50, 128), VertexInfo("v2", "v2", 50, 128)], [Edge("v1", "v2", "REBALANCE")]
)
RESCALE = {"v1": 25, "v2": 10}


def advise(**changes: object):
    args = {
        "heap_used": 5096 * MIB,
        "managed_used": 10_000 * MIB,
        "metaspace_used": 100 * MIB,
        "topology": TOPOLOGY,
        "parallelism": RESCALE,
        "slots_per_tm": 5,
        "scale_down_compensation": False,
        **changes,
    }
    return advise_memory(SPEC, **args)


def test_the_spec_adds_up():
    assert (
        SPEC.heap + SPEC.managed + SPEC.network + SPEC.framework_off_heap + SPEC.task_off_heap == SPEC.flink
    )


def test_network_memory_counts_the_channels_of_every_edge_at_the_new_parallelism():
    # v2's input gate: 25 channels; v1's output: 10 channels; 2 buffers each plus 8 floating, per slot.
    assert (
        network_bytes(TOPOLOGY, RESCALE, 5, NetworkConfig()) == ((25 * 2 + 8) + (10 * 2 + 8)) * 32 * 1024 * 5
    )
    forward = JobTopology.build(
        [VertexInfo("a", "a", 10, 128), VertexInfo("b", "b", 10, 128)], [Edge("a", "b", "FORWARD")]
    )
    assert network_bytes(forward, {}, 1, NetworkConfig()) == 2 * (1 * 2 + 8) * 32 * 1024
    assert network_bytes(forward, {"b": 15}, 1, NetworkConfig()) == ((1 * 2 + 8) + (2 * 2 + 8)) * 32 * 1024


def test_heap_and_metaspace_are_usage_plus_overhead_and_managed_keeps_its_size():
    advice = advise()
    assert advice is not None
    assert advice.network == 13_760 * 1024 and memory_size_text(advice.network) == "13760 kb"
    assert advice.metaspace == 120 * MIB and advice.heap == 6_412_251_955
    assert advice.managed == SPEC.managed
    assert advice.process == 20_108_162_027
    assert (advice.managed_fraction, advice.overhead_fraction) == (0.654, 0.054)
    config = advice.config()
    assert config["taskmanager.memory.process.size"] == "20108162027 bytes"
    assert config["taskmanager.memory.jvm-metaspace.size"] == "120 mb"
    assert config["taskmanager.memory.managed.fraction"] == "0.654"
    assert "Remove the following config entries if present" in advice.text()


def test_maximized_managed_memory_takes_all_that_is_left():
    advice = advise(maximize_managed=True)
    assert advice is not None and advice.process == 30 * GIB
    assert (advice.managed_fraction, advice.overhead_fraction) == (0.789, 0.034)


def test_unused_managed_memory_is_advised_away_and_a_scale_down_compensates_the_heap():
    unused = advise(managed_used=0)
    assert unused is not None and unused.managed == 0 and unused.process == 7_760_130_867
    assert (unused.managed_fraction, unused.overhead_fraction) == (0.0, 0.139)
    # 50 slots on 10 TaskManagers -> 25 on 5: each TaskManager's heap doubles.
    compensated = advise(managed_used=0, scale_down_compensation=True)
    assert compensated is not None and compensated.heap == 2 * unused.heap
    assert compensated.process == 14_172_382_822 and compensated.overhead_fraction == 0.076
    up = advise(managed_used=0, scale_down_compensation=True, parallelism={"v1": 60})  # a scale-up: as is
    assert up is not None and up.heap == unused.heap


def test_no_pool_gets_more_than_the_process_size_and_metaspace_comes_before_heap():
    advice = advise(heap_used=30_812_254_720, metaspace_used=256 * MIB)
    assert advice is not None and advice.process == 30 * GIB
    assert advice.metaspace == 322_122_547


@pytest.mark.parametrize("used", [math.nan, -1.0])
def test_unknown_usage_counts_as_none(used):
    advice = advise(heap_used=used, metaspace_used=used, managed_used=used)
    assert advice is not None and advice.heap == advice.metaspace == advice.managed == 0


def test_no_advice_without_a_known_process_size():
    unknown = TaskManagerMemory(0, 0, 0, 0, 0, 0, 0, 0, 0)
    args = {"heap_used": 1.0, "managed_used": 0.0, "metaspace_used": 1.0, "topology": TOPOLOGY}
    assert advise_memory(unknown, parallelism=RESCALE, slots_per_tm=5, **args) is None
