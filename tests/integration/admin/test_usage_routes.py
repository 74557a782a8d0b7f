"""Usage and budgets over the admin API and the CLI: grouped reports in the deployment's
time zone, budgets replaced and audited, the same operations from ``hubbub``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agent_core.admin import keys
from agent_core.db.engine import transaction
from agent_core.db.models import Bot, Tenant, UsageRecord
from gateway.cli import app
from gateway.routes.admin import PREFIX
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env

pytestmark = pytest.mark.integration

CALLS = (
    # (at, user, model, prompt, completion, cost)
    (datetime(2026, 3, 10, 9, 0, tzinfo=UTC), "u1", "openai/a", 100, 10, 0.25),
    (datetime(2026, 3, 10, 10, 0, tzinfo=UTC), "u1", "openai/b", 200, 20, 0.5),
    # 23:30 UTC is already the 11th in Paris.
    (datetime(2026, 3, 10, 23, 30, tzinfo=UTC), "u2", "openai/a", 300, 30, 1.0),
    (datetime(2026, 3, 12, 9, 0, tzinfo=UTC), None, "openai/a", 400, 40, 2.0),
)


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return hubbub_env(db_url=db_url, home=tmp_path, fake=None, timezone="Europe/Paris")


@pytest.fixture
def gateway(env: dict[str, str], gateway_factory: Callable[..., GatewayServer]) -> GatewayServer:
    return gateway_factory(settings_from_env(env))


@pytest.fixture
def seeded(gateway: GatewayServer) -> tuple[int, str]:
    """Tenant acme with one bot and the calls above; (bot id, admin key)."""
    with transaction(gateway.runtime.factory) as db:
        db.add(Tenant(id="acme", name="Acme"))
        db.flush()
        bot = Bot(tenant_id="acme", platform="telegram", name="support", settings={})
        db.add(bot)
        db.flush()
        for n, (at, user, model, prompt, completion, cost) in enumerate(CALLS):
            db.add(
                UsageRecord(
                    call_key=f"k{n}",
                    tenant_id="acme",
                    bot_id=bot.id,
                    chat_key="acme/chat",
                    user_id=user,
                    model=model,
                    purpose="main" if user else "summary",
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    cost_usd=cost,
                    cost_known=model != "openai/b",
                    at=at,
                )
            )
        admin = keys.create(db, tenant_id="acme", scope="admin").secret
    return bot.id, admin


@pytest.fixture
def client(gateway: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.base_url, timeout=60) as c:
        yield c


def _report(client: httpx.Client, auth: dict[str, str], **params: str) -> dict[str, object]:
    response = client.get(f"{PREFIX}/tenants/acme/usage", params=params, headers=auth)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def _keyed(body: dict[str, object]) -> dict[str, tuple[int, float, int]]:
    rows = body["rows"]
    assert isinstance(rows, list)
    return {r["key"]: (r["tokens"], r["cost_usd"], r["calls"]) for r in rows}


def test_usage_is_grouped_by_day_bot_user_and_model_within_from_and_to(
    client: httpx.Client, seeded: tuple[int, str]
) -> None:
    bot_id, admin = seeded
    auth = {"Authorization": f"Bearer {admin}"}
    span = {"from": "2026-03-10", "to": "2026-03-12"}

    by_day = _report(client, auth, **span, group_by="day")
    assert by_day["timezone"] == "Europe/Paris"
    assert (by_day["from"], by_day["to"]) == ("2026-03-10", "2026-03-12")
    assert _keyed(by_day) == {
        "2026-03-10": (330, 0.75, 2),
        "2026-03-11": (330, 1.0, 1),
        "2026-03-12": (440, 2.0, 1),
    }
    assert by_day["total"] == {
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "tokens": 1100,
        "cost_usd": 3.75,
        "calls": 4,
        "unpriced_calls": 1,
    }
    assert _keyed(_report(client, auth, **span, group_by="bot")) == {str(bot_id): (1100, 3.75, 4)}
    assert _keyed(_report(client, auth, **span, group_by="user")) == {
        "": (440, 2.0, 1),
        "u1": (330, 0.75, 2),
        "u2": (330, 1.0, 1),
    }
    one_day = _report(client, auth, **{"from": "2026-03-11", "to": "2026-03-11"}, group_by="model")
    assert _keyed(one_day) == {"openai/a": (330, 1.0, 1)}

    bad = [({"group_by": "planet"}, 400), ({"from": "2026-03-12", "to": "2026-03-10"}, 400)]
    bad.append(({"from": "yesterday"}, 422))
    for params, status in bad:
        response = client.get(f"{PREFIX}/tenants/acme/usage", params=params, headers=auth)
        assert response.status_code == status, response.text
        assert "error" in response.json()


def test_budgets_are_replaced_validated_and_audited(
    client: httpx.Client, seeded: tuple[int, str]
) -> None:
    _, admin = seeded
    auth = {"Authorization": f"Bearer {admin}"}
    url = f"{PREFIX}/tenants/acme/budgets"
    assert client.get(url, headers=auth).json()["budgets"] == []

    wanted = [
        {"scope": "tenant", "period": "month", "unit": "usd", "amount": 100.0},
        {"scope": "user", "period": "day", "unit": "tokens", "amount": 20000.0},
    ]
    response = client.put(url, json={"budgets": wanted}, headers=auth)
    assert response.status_code == 200, response.text
    stored = [{k: v for k, v in b.items() if k != "id"} for b in response.json()["budgets"]]
    assert stored == wanted
    assert set(response.json()["tenant_used"]) == {"day", "month"}

    for body in (
        {"budgets": [{"scope": "planet", "period": "day", "unit": "usd", "amount": 1}]},
        {"budgets": [{"scope": "chat", "period": "day", "unit": "usd", "amount": -1}]},
        {"budgets": [], "extra": 1},
    ):
        assert client.put(url, json=body, headers=auth).status_code == 422
    half_token = {"scope": "chat", "period": "day", "unit": "tokens", "amount": 1.5}
    assert client.put(url, json={"budgets": [half_token]}, headers=auth).status_code == 400
    assert len(client.get(url, headers=auth).json()["budgets"]) == 2, "bad input changes nothing"

    assert client.put(url, json={"budgets": wanted[1:]}, headers=auth).status_code == 200
    events = client.get(f"{PREFIX}/tenants/acme/audit", headers=auth).json()
    assert [e["action"] for e in events] == ["budgets.update", "budgets.update"]
    assert events[0]["before"] == {"budgets": wanted}
    assert events[0]["after"] == {"budgets": wanted[1:]}
    assert events[1]["before"] == {"budgets": []}


def test_the_cli_sets_lists_and_removes_budgets_and_prints_usage(
    env: dict[str, str],
    seeded: tuple[int, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gateway.cli.configure_logging", lambda *a, **k: None)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    runner = CliRunner()

    def cli(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, result.output
        return result.output

    cli("budgets", "set", "--tenant", "acme", "--scope", "chat", "--usd", "2.5", "--period", "day")
    cli("budgets", "set", "--tenant", "acme", "--scope", "user", "--tokens", "9000", "--period",
        "month")  # fmt: skip
    cli("budgets", "set", "--tenant", "acme", "--scope", "chat", "--usd", "3", "--period", "day")
    assert cli("budgets", "list", "--tenant", "acme").splitlines() == [
        "acme  chat  day  $3.00",
        "acme  user  month  9,000 tokens",
    ]
    assert "Give either --tokens N or --usd X." in cli(
        "budgets", "set", "--tenant", "acme", "--scope", "chat", "--period", "day", code=2
    )
    assert "scope must be one of tenant, user, chat" in cli(
        "budgets", "set", "--tenant", "acme", "--scope", "room", "--usd", "1", "--period", "day",
        code=2,
    )  # fmt: skip
    assert "No tenant 'nope'" in cli(
        "budgets", "set", "--tenant", "nope", "--scope", "chat", "--usd", "1", "--period", "day",
        code=1,
    )  # fmt: skip
    cli("budgets", "remove", "--tenant", "acme", "--scope", "chat", "--period", "day", "--unit",
        "usd")  # fmt: skip
    assert cli("budgets", "list").splitlines() == ["acme  user  month  9,000 tokens"]

    report = cli("usage", "--tenant", "acme", "--from", "2026-03-01", "--to", "2026-03-31",
                 "--group-by", "model").splitlines()  # fmt: skip
    assert report[0] == "Usage of acme, 2026-03-01 to 2026-03-31 (Europe/Paris), by model:"
    assert report[2].split() == ["openai/a", "880", "800", "80", "$3.25", "3"]
    assert report[3].split() == ["openai/b", "220", "200", "20", "$0.5000", "1", "(1", "unpriced)"]
    assert report[4].split() == ["total", "1,100", "1,000", "100", "$3.75", "4", "(1", "unpriced)"]
    assert "No tenant" in cli("usage", "--tenant", "nope", code=1)
