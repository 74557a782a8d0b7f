"""Which models a tenant's sessions may use: the deployment's list, narrowed by the tenant."""

from __future__ import annotations

import pytest

from agent_core.config import Settings
from agent_core.errors import InvalidInput
from agent_core.tenancy.settings import TenantDefaults, check_models, model_choice

MAIN, FALLBACK, THIRD = "openai/main", "openai/fallback", "openai/third"
DEPLOYMENT = Settings(model=MAIN, fallback_models=FALLBACK, models=f"{MAIN},{FALLBACK},{THIRD}")


def test_the_deployment_list_defaults_to_the_main_model_and_its_fallbacks() -> None:
    settings = Settings(model=MAIN, fallback_models=f"{FALLBACK},{MAIN}")
    assert settings.allowed_models == (MAIN, FALLBACK)
    assert settings.llm.fallbacks == (FALLBACK,), "the main model is no fallback of itself"


def test_the_main_model_must_be_in_an_explicit_list() -> None:
    with pytest.raises(ValueError, match="HUBBUB_MODEL openai/main is not in HUBBUB_MODELS"):
        Settings(model=MAIN, models=THIRD)


def test_endpoints_are_json() -> None:
    settings = Settings(model=MAIN, model_endpoints='{"openai/fallback": "http://b/v1"}')
    assert settings.llm.endpoints == ((FALLBACK, "http://b/v1"),)
    with pytest.raises(ValueError, match="write HUBBUB_MODEL_ENDPOINTS as JSON"):
        Settings(model=MAIN, model_endpoints="openai/fallback=http://b/v1")


class TestChoice:
    def test_without_tenant_models_the_deployment_s_apply(self) -> None:
        choice = model_choice(TenantDefaults(), DEPLOYMENT)
        assert choice.allowed == (MAIN, FALLBACK, THIRD)
        assert choice.default == MAIN
        assert choice.pick(None) == MAIN
        assert choice.pick(THIRD) == THIRD

    def test_the_tenant_narrows_the_list_and_picks_the_default(self) -> None:
        tenant = TenantDefaults(models=(THIRD, FALLBACK), default_model=THIRD)
        choice = model_choice(tenant, DEPLOYMENT)
        assert choice.allowed == (THIRD, FALLBACK)
        assert choice.pick(None) == THIRD
        assert choice.pick(MAIN) == THIRD, "a choice no longer allowed gives way to the default"

    def test_models_the_operator_removed_are_dropped(self) -> None:
        tenant = TenantDefaults(models=("openai/retired", FALLBACK), default_model="openai/retired")
        choice = model_choice(tenant, DEPLOYMENT)
        assert choice.allowed == (FALLBACK,)
        assert choice.default == FALLBACK

    def test_no_model_configured_offers_none(self) -> None:
        choice = model_choice(TenantDefaults(), Settings())
        assert choice.allowed == ()
        assert choice.pick("openai/anything") is None


class TestCheck:
    OFFERED = DEPLOYMENT.allowed_models

    @pytest.mark.parametrize(
        ("models", "default", "message"),
        [
            (("openai/gpt-9",), None, "model 'openai/gpt-9' is not offered by this deployment"),
            (None, "openai/gpt-9", "model 'openai/gpt-9' is not offered by this deployment"),
            ((MAIN,), THIRD, "default_model 'openai/third' is not in the tenant's models"),
        ],
    )
    def test_refuses_names_that_could_not_run(
        self, models: tuple[str, ...] | None, default: str | None, message: str
    ) -> None:
        with pytest.raises(InvalidInput, match=message):
            check_models(models, default, self.OFFERED)

    @pytest.mark.parametrize(
        ("models", "default"),
        [(None, None), ((THIRD,), None), (None, THIRD), ((MAIN, THIRD), MAIN)],
    )
    def test_accepts_what_the_deployment_offers(
        self, models: tuple[str, ...] | None, default: str | None
    ) -> None:
        check_models(models, default, self.OFFERED)

    def test_the_stored_settings_round_trip(self) -> None:
        stored = TenantDefaults(models=(MAIN, THIRD), default_model=THIRD)
        assert stored.to_json() == {"models": [MAIN, THIRD], "default_model": THIRD}
        assert TenantDefaults.from_json(stored.to_json()) == stored
