from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_core.config import DEFAULT_PORT, Settings, load_settings


def test_defaults_are_the_embedded_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HUBBUB_HOME", str(tmp_path))
    settings = load_settings()
    assert settings.embedded
    assert settings.resolved_database_url == f"sqlite:///{tmp_path.resolve()}/hubbub.db"
    assert settings.port == DEFAULT_PORT
    assert settings.model is None
    assert settings.compression.threshold == 0.5
    assert settings.compression.hygiene_threshold == 0.85


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUBBUB_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("HUBBUB_COMPRESSION_THRESHOLD", "0.6")
    monkeypatch.setenv("HUBBUB_LLM_API_KEY", "sk-secret")
    settings = load_settings()
    assert settings.llm.model == "openai/gpt-4o-mini"
    assert settings.compression.threshold == 0.6
    assert settings.llm.api_key == "sk-secret"
    assert "sk-secret" not in repr(settings)


def test_yaml_file_below_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "hubbub.yaml"
    config.write_text("model: openai/from-yaml\nport: 9000\n")
    monkeypatch.setenv("HUBBUB_CONFIG", str(config))
    monkeypatch.setenv("HUBBUB_PORT", "9100")
    settings = load_settings()
    assert settings.model == "openai/from-yaml"
    assert settings.port == 9100


def test_missing_yaml_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUBBUB_CONFIG", "/nonexistent/hubbub.yaml")
    with pytest.raises(FileNotFoundError, match="HUBBUB_CONFIG"):
        load_settings()


@pytest.mark.parametrize(
    ("field", "value"),
    [("port", "-1"), ("max_message_chars", "0"), ("compression_threshold", "1.5")],
)
def test_invalid_values_name_the_setting(field: str, value: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings.model_validate({field: value})


def test_hygiene_must_stay_above_compressor() -> None:
    with pytest.raises(ValidationError, match="HYGIENE"):
        Settings(compression_threshold=0.9, compression_hygiene_threshold=0.85)


def test_comma_separated_allowlists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUBBUB_ALLOW_USERS", "42, 43")
    assert load_settings().allow_users == ["42", "43"]


def test_rotation_on_compaction_is_refused_clearly() -> None:
    with pytest.raises(ValidationError, match="compacts in place"):
        Settings.model_validate({"compression_in_place": "false"})


def test_platform_limits_override_one_bucket_and_keep_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HUBBUB_PLATFORM_LIMITS", '{"telegram": {"group": "10/minute"}}')
    limits = load_settings().platform_limits
    assert limits["telegram"] == {"bot": "30/second", "chat": "1/second", "group": "10/minute"}
    assert limits["discord"]["bot"] == "50/second"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ('{"telegram": {"group": "lots"}}', "telegram.group"),
        ('{"telegram": {"chat": "0/second"}}', "telegram.chat"),
        ('{"matrix": {"room": "1/second"}}', "matrix"),
    ],
)
def test_a_bad_platform_limit_is_named(
    monkeypatch: pytest.MonkeyPatch, value: str, named: str
) -> None:
    monkeypatch.setenv("HUBBUB_PLATFORM_LIMITS", value)
    with pytest.raises(ValidationError, match=named):
        load_settings()
