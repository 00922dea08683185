"""A deterministic simulated Flink 2.3 session cluster that answers Flink's REST API.

``SimCluster`` (engine) holds the physics and moves only with its clock; ``handle``/``transport``
(rest) answer REST requests in-process; ``SimulatorServer`` (server) serves them over HTTP; scenarios
name the jobs the demo and tests use.
"""

from __future__ import annotations

from autoscaler.simulator.engine import (
    ResourceRequirementsError,
    SimCluster,
    SimJob,
    UnknownJobError,
)
from autoscaler.simulator.rest import handle, transport
from autoscaler.simulator.scenarios import SCENARIOS, demo_job, load_scenario, work_job
from autoscaler.simulator.server import SimulatorServer, run_simulator
from autoscaler.simulator.spec import (
    Bursts,
    Constant,
    Noise,
    Product,
    Ramp,
    RateSchedule,
    SimClusterSpec,
    SimEdgeSpec,
    SimJobSpec,
    SimVertexSpec,
    Sine,
    Steps,
)

__all__ = [
    "SCENARIOS",
    "Bursts",
    "Constant",
    "Noise",
    "Product",
    "Ramp",
    "RateSchedule",
    "ResourceRequirementsError",
    "SimCluster",
    "SimClusterSpec",
    "SimEdgeSpec",
    "SimJob",
    "SimJobSpec",
    "SimVertexSpec",
    "SimulatorServer",
    "Sine",
    "Steps",
    "UnknownJobError",
    "demo_job",
    "handle",
    "load_scenario",
    "run_simulator",
    "transport",
    "work_job",
]
