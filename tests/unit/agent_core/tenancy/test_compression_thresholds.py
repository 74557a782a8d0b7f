"""A tenant's compression thresholds: checked against the pair that would run, then applied."""

from __future__ import annotations

import pytest

from agent_core.compaction.triggers import Lines
from agent_core.config import CompressionSettings
from agent_core.errors import InvalidInput
from agent_core.tenancy.settings import (
    TenantDefaults,
    check_compression_thresholds,
    compression_for,
)

DEPLOYMENT = CompressionSettings(threshold=0.5, hygiene_threshold=0.85)
WINDOW = 400_000


class TestCheck:
    @pytest.mark.parametrize(
        ("compression", "hygiene", "message"),
        [
            (0.0, None, "compression_threshold 0.0 is out of range"),
            (1.0, None, "compression_threshold 1.0 is out of range"),
            (None, 1.2, "hygiene_threshold 1.2 is out of range"),
            (0.9, None, "hygiene_threshold 0.85 is below compression_threshold 0.9"),
            (None, 0.4, "hygiene_threshold 0.4 is below compression_threshold 0.5"),
            (0.6, 0.55, "hygiene_threshold 0.55 is below compression_threshold 0.6"),
        ],
    )
    def test_refuses_what_could_not_run(
        self, compression: float | None, hygiene: float | None, message: str
    ) -> None:
        with pytest.raises(InvalidInput, match=message):
            check_compression_thresholds(compression, hygiene, DEPLOYMENT)

    @pytest.mark.parametrize(
        ("compression", "hygiene"), [(None, None), (0.3, None), (0.9, 0.95), (None, 0.6)]
    )
    def test_accepts_a_pair_that_runs(
        self, compression: float | None, hygiene: float | None
    ) -> None:
        check_compression_thresholds(compression, hygiene, DEPLOYMENT)


class TestApply:
    def test_a_tenant_without_thresholds_runs_the_deployment_s(self) -> None:
        assert compression_for(DEPLOYMENT, TenantDefaults()) is DEPLOYMENT

    def test_the_tenant_s_thresholds_move_its_lines(self) -> None:
        tenant = TenantDefaults(compression_threshold=0.3, hygiene_threshold=0.6)
        own = Lines.compute(compression_for(DEPLOYMENT, tenant), WINDOW, None)
        ours = Lines.compute(DEPLOYMENT, WINDOW, None)
        assert (own.threshold, own.hygiene) == (120_000, 240_000)
        assert (ours.threshold, ours.hygiene) == (200_000, 340_000)

    def test_a_safety_net_left_below_the_compressor_is_raised_to_it(self) -> None:
        # Stored when the deployment's compressor started at 0.5; it now starts at 0.7.
        tenant = TenantDefaults(hygiene_threshold=0.6)
        moved = CompressionSettings(threshold=0.7, hygiene_threshold=0.9)
        applied = compression_for(moved, tenant)
        assert (applied.threshold, applied.hygiene_threshold) == (0.7, 0.7)

    def test_stored_values_round_trip_and_nonsense_is_unset(self) -> None:
        tenant = TenantDefaults(compression_threshold=0.3, hygiene_threshold=0.6)
        assert TenantDefaults.from_json(tenant.to_json()) == tenant
        broken = TenantDefaults.from_json({"compression_threshold": "high", "hygiene_threshold": 2})
        assert (broken.compression_threshold, broken.hygiene_threshold) == (None, None)
