"""The cost model: what a run costs, and when a backlog is above the lag target."""

from __future__ import annotations

import pytest

from autoscaler.foresight.cost import Cost, CostModel, Interval, above_target, price
from autoscaler.settings import AutoscalerOptions, ConfigError


def test_the_total_is_the_three_quantities_at_their_prices() -> None:
    model = CostModel(slot_second=2.0, restart=100.0, lag_second=10.0)
    run = [
        Interval(1.0, 3, 1000.0, 3000.0, 0.0),  # 3 slot-s, keeping up
        Interval(1.0, 3, 1000.0, 0.0, 1000.0),  # restarting with records waiting: above target
        Interval(2.0, 4, 1000.0, 4000.0, 0.0),  # 8 slot-s, drained
    ]

    cost = price(run, restarts=1, model=model)

    assert cost == Cost(slot_seconds=14.0, restarts=1, lag_seconds=1.0, total=2 * 14 + 100 + 10 * 1)


def test_without_a_lag_target_a_backlog_is_above_it_when_it_would_not_drain_within_catch_up() -> None:
    model = CostModel(catch_up_s=100.0)
    # 1000 rec/s spare: 100,000 records drain in exactly 100 s (within), 100,001 not.
    assert not above_target(100_000.0, rate=1000.0, capacity=2000.0, model=model)
    assert above_target(100_001.0, rate=1000.0, capacity=2000.0, model=model)
    # No spare capacity (slower than the input, or restarting): above as soon as a record waits.
    assert above_target(1.0, rate=1000.0, capacity=1000.0, model=model)
    assert above_target(5.0, rate=1000.0, capacity=0.0, model=model)
    assert not above_target(0.5, rate=1000.0, capacity=0.0, model=model)  # less than one record


def test_a_lag_target_bounds_the_backlog_in_seconds_of_the_offered_rate() -> None:
    model = CostModel(lag_target_s=30.0)
    assert not above_target(30_000.0, rate=1000.0, capacity=0.0, model=model)  # 30 s of lag: at the target
    assert above_target(30_001.0, rate=1000.0, capacity=5000.0, model=model)  # capacity does not matter
    assert above_target(2.0, rate=0.0, capacity=5000.0, model=model)  # no input: any backlog is late


@pytest.mark.parametrize(
    ("field", "value"),
    [("slot_second", -1.0), ("restart", float("nan")), ("lag_second", float("inf")), ("lag_target_s", -5.0)],
)
def test_a_price_or_target_that_makes_no_sense_is_refused_with_its_name(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field.split("_")[0]):
        CostModel(**{field: value})


def test_the_catch_up_duration_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="catch-up"):
        CostModel(catch_up_s=-1.0)
    # 0 (catch-up.duration 0): no backlog is meant to last, so any is above target.
    assert above_target(1.0, rate=1000.0, capacity=1e9, model=CostModel(catch_up_s=0.0))


def test_the_prices_and_target_are_a_jobs_options() -> None:
    assert CostModel.of(AutoscalerOptions()) == CostModel()  # the defaults agree
    options = AutoscalerOptions.from_flink_conf(
        {
            "job.autoscaler.cost.slot-second": "2",
            "job.autoscaler.cost.restart": "120",
            "job.autoscaler.cost.lag-second": "50",
            "job.autoscaler.lag.target": "45 s",
            "job.autoscaler.catch-up.duration": "10 min",
        }
    )
    assert CostModel.of(options) == CostModel(
        slot_second=2.0, restart=120.0, lag_second=50.0, lag_target_s=45.0, catch_up_s=600.0
    )


@pytest.mark.parametrize("key", ["cost.slot-second", "cost.restart", "cost.lag-second"])
@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_negative_or_infinite_price_is_refused_naming_its_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        AutoscalerOptions.from_flink_conf({f"job.autoscaler.{key}": value})


def test_negative_restarts_are_refused() -> None:
    with pytest.raises(ValueError, match="restarts"):
        price([], restarts=-1, model=CostModel())
