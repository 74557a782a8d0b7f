"""A model call logs nothing of litellm's at INFO: the router's per-call line is noise (and
cost 4 % of a worker's time in a burst)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from agent_core.config import LLMSettings
from agent_core.llm.litellm_model import LiteLLMModel
from agent_core.logs import NOISY_LOGGERS, configure_logging
from tests.fixtures.llm_server import FakeLLM

pytestmark = pytest.mark.integration


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logging_as_configured() -> Iterator[None]:
    """Hubbub's logging set up as the CLI does, undone afterwards."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, {n: logging.getLogger(n).level for n in NOISY_LOGGERS}
    configure_logging("INFO")
    yield
    root.handlers[:], level, levels = saved
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


@pytest.mark.usefixtures("logging_as_configured")
def test_a_model_call_at_info_logs_nothing_of_litellm(
    fake_llm: FakeLLM, capfd: pytest.CaptureFixture[str]
) -> None:
    seen = _Records()
    router = logging.getLogger("LiteLLM Router")
    router.addHandler(seen)
    try:
        model = LiteLLMModel(
            LLMSettings(model="openai/fake-model", api_base=fake_llm.base_url, api_key="sk-t")
        )
        assert model.complete([{"role": "user", "content": "hi"}]).content == "echo: hi"
    finally:
        router.removeHandler(seen)
    assert [r.getMessage() for r in seen.records if r.levelno < logging.WARNING] == []
    assert "200 OK" not in capfd.readouterr().err
