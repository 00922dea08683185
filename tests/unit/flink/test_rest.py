"""What every Flink request shares: the endpoint templates the request hook reports."""

from __future__ import annotations

import pytest

from autoscaler.flink.rest import endpoint_template


@pytest.mark.parametrize(
    ("path", "template"),
    [
        ("/jobs/overview", "/jobs/overview"),
        ("/jobs/ab12", "/jobs/:jobid"),
        ("/jobs/ab12/vertices/cd34/subtasks/metrics", "/jobs/:jobid/vertices/:vertexid/subtasks/metrics"),
        ("/jobs/ab12/resource-requirements", "/jobs/:jobid/resource-requirements"),
        ("/taskmanagers/metrics", "/taskmanagers/metrics"),
        ("/taskmanagers/10.0.0.7:6122-abc/metrics", "/taskmanagers/:taskmanagerid/metrics"),
        ("/jobmanager/config", "/jobmanager/config"),
    ],
)
def test_endpoint_templates_keep_label_values_few(path, template):
    assert endpoint_template(path) == template
