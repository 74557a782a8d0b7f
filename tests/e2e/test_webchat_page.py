"""The web chat page in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Request, expect

from adapters.webchat.feed import LOCAL_FEED
from tests.fixtures.llm_server import FakeLLM, ScriptedReply
from tests.fixtures.services import GatewayServer, hubbub_env, settings_from_env

pytestmark = pytest.mark.e2e

# A loaded CI machine renders slowly: wait on what the page shows, with a generous bound.
expect.set_options(timeout=60_000)


def _gateway(
    tmp_path: Path,
    sqlite_url: str,
    fake: FakeLLM | None,
    gateway_factory: Callable[..., GatewayServer],
) -> GatewayServer:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake)
    return gateway_factory(settings_from_env(env))


def test_chat_in_the_browser(
    page: Page,
    tmp_path: Path,
    sqlite_url: str,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = _gateway(tmp_path, sqlite_url, fake_llm, gateway_factory)
    page.goto(f"{gateway.base_url}/?c=browser-1")
    expect(page.locator("#model")).to_contain_text("openai/fake-model")
    expect(page.locator("#banner")).to_be_hidden()
    page.fill("#text", "Hello from the browser")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.user")).to_have_text("Hello from the browser")
    expect(page.locator(".msg.assistant")).to_have_text("echo: Hello from the browser")
    expect(page.locator("#text")).to_have_value("")
    page.reload()
    expect(page.locator(".msg")).to_have_count(2)


def test_commands_and_errors_are_shown(
    page: Page,
    tmp_path: Path,
    sqlite_url: str,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = _gateway(tmp_path, sqlite_url, fake_llm, gateway_factory)
    page.goto(f"{gateway.base_url}/?c=browser-2")
    page.fill("#text", "/help")
    page.click("#send")
    expect(page.locator(".msg.command").last).to_contain_text("/new")
    page.fill("#text", "x" * 32_001)
    page.click("#send")
    expect(page.locator("#error")).to_contain_text("limit is 32,000")
    expect(page.locator("#text")).not_to_have_value("")


def test_without_a_model_the_page_says_what_to_set(
    page: Page,
    tmp_path: Path,
    sqlite_url: str,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = _gateway(tmp_path, sqlite_url, None, gateway_factory)
    page.goto(f"{gateway.base_url}/?c=browser-3")
    expect(page.locator("#banner")).to_be_visible()
    expect(page.locator("#banner")).to_contain_text("HUBBUB_MODEL")
    page.fill("#text", "anyone?")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.notice")).to_contain_text("No model is configured")


MARKDOWN_REPLY = """Here is **bold**, `code` and a list:

- one
- two

<script>window.pwned = true</script> <img src=x onerror="window.pwned = true">
[a trap](javascript:window.pwned=true) and [a page](https://example.org/docs)."""


def test_replies_show_markdown_safely(
    page: Page,
    tmp_path: Path,
    sqlite_url: str,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    gateway = _gateway(tmp_path, sqlite_url, fake_llm, gateway_factory)
    fake_llm.queue_replies(ScriptedReply(content=MARKDOWN_REPLY))
    page.goto(f"{gateway.base_url}/?c=browser-md")
    page.fill("#text", "show me **markdown**")
    page.click("#send")
    reply = page.locator(".msg.assistant")
    expect(reply.locator("strong")).to_have_text("bold")
    expect(reply.locator("code")).to_have_text("code")
    expect(reply.locator("li")).to_have_text(["one", "two"])
    expect(reply.locator("a")).to_have_count(1)
    expect(reply.locator("a")).to_have_attribute("href", "https://example.org/docs")
    expect(reply).to_contain_text("<script>window.pwned = true</script>")
    expect(reply).to_contain_text("[a trap](javascript:window.pwned=true)")
    assert reply.locator("script, img").count() == 0
    assert page.evaluate("window.pwned") is None
    expect(page.locator(".msg.user")).to_have_text("show me **markdown**")


def test_an_unreachable_gateway_is_shown_and_the_text_kept(
    page: Page,
    tmp_path: Path,
    sqlite_url: str,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm)
    first = gateway_factory(settings_from_env(env))
    page.goto(f"{first.base_url}/?c=browser-down")
    expect(page.locator("#model")).to_contain_text("openai/fake-model")
    expect(page.locator("#error")).to_be_hidden()
    first.stop()

    page.fill("#text", "are you there?")
    page.click("#send")
    expect(page.locator("#error")).to_be_visible()
    expect(page.locator("#error")).to_contain_text("can't be reached")
    expect(page.locator("#text")).to_have_value("are you there?")

    gateway_factory(settings_from_env(env), port=first.port)
    expect(page.locator("#error")).to_be_hidden()
    page.click("#send")
    expect(page.locator(".msg.assistant")).to_have_text("echo: are you there?")
    expect(page.locator("#text")).to_have_value("")


def test_in_public_mode_each_browser_sees_only_its_own_conversation(
    browser: Browser,
    tmp_path: Path,
    sqlite_url: str,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm, webchat="public")
    gateway = gateway_factory(settings_from_env(env))
    url = f"{gateway.base_url}/?c=same-link"
    contexts = [browser.new_context(), browser.new_context()]
    try:
        ann, bob = (context.new_page() for context in contexts)
        ann.goto(url)
        ann.fill("#text", "ann's question")
        ann.click("#send")
        expect(ann.locator(".msg.assistant")).to_have_text("echo: ann's question")
        assert ann.evaluate("document.cookie") == ""  # HttpOnly: scripts never see it
        bob.goto(url)
        bob.fill("#text", "bob's question")
        bob.click("#send")
        expect(bob.locator(".msg.assistant")).to_have_text("echo: bob's question")
        expect(bob.locator(".msg")).to_have_count(2)
        ann.reload()
        expect(ann.locator(".msg")).to_have_count(2)
        expect(ann.locator(".msg.user")).to_have_text("ann's question")
    finally:
        for context in contexts:
            context.close()


FINAL_REPLY = """Done. Steps:

1. install
2. run

```
hubbub up
```

See [the docs](https://example.org/docs). <img src=x onerror="window.pwned = true">"""


def test_a_streamed_reply_grows_in_place_and_ends_as_safe_markdown(
    page: Page,
    tmp_path: Path,
    sqlite_url: str,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    # The model call is held while the test publishes drafts: it must not time out meanwhile.
    env = hubbub_env(db_url=sqlite_url, home=tmp_path, fake=fake_llm, llm_timeout=300)
    gateway = gateway_factory(settings_from_env(env))
    fake_llm.hold = threading.Event()
    fake_llm.queue_replies(ScriptedReply(content=FINAL_REPLY))
    polls: list[str] = []

    def count_polls(request: Request) -> None:
        if request.method == "GET" and request.url.endswith("/messages"):
            polls.append(request.url)

    page.on("request", count_polls)
    page.goto(f"{gateway.base_url}/?c=browser-stream")
    page.fill("#text", "how do I start?")
    page.keyboard.press("Enter")
    user = page.locator(".msg.user")
    expect(user).to_have_text("how do I start?")
    trigger = user.get_attribute("data-id")
    assert trigger is not None
    page.wait_for_function("streaming === true", timeout=60_000)
    expect(page.locator("#typing")).to_contain_text("writing")
    polled = len(polls)

    draft = page.locator(".msg.draft")
    LOCAL_FEED.publish_draft("browser-stream", trigger, "Done. **Ste")
    expect(draft).to_have_text("Done. **Ste")
    LOCAL_FEED.publish_draft("browser-stream", trigger, "Done. Steps:\n\n1. install\n2. run")
    expect(draft.locator("li")).to_have_text(["install", "run"])
    LOCAL_FEED.publish_draft(
        "browser-stream",
        trigger,
        'Done. <script>window.pwned = true</script> <img src=x onerror="window.pwned = true"> '
        "[trap](javascript:window.pwned=true)",
    )
    expect(draft).to_contain_text("<script>window.pwned = true</script>")
    assert draft.locator("script, img, a").count() == 0
    expect(page.locator(".msg.assistant")).to_have_count(1)

    fake_llm.hold.set()
    reply = page.locator(".msg.assistant")
    expect(draft).to_have_count(0)
    expect(reply).to_have_count(1)
    expect(reply.locator("li")).to_have_text(["install", "run"])
    expect(reply.locator("pre code")).to_have_text("hubbub up\n")
    expect(reply.locator("a")).to_have_attribute("href", "https://example.org/docs")
    expect(reply.locator("a")).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(reply).to_contain_text('<img src=x onerror="window.pwned = true">')
    assert reply.locator("img, script").count() == 0
    expect(page.locator("#typing")).to_have_text("")
    # A late draft of an answered message does not come back.
    LOCAL_FEED.publish_draft("browser-stream", trigger, "stale")
    page.fill("#text", "thanks")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant")).to_have_count(2)
    expect(draft).to_have_count(0)
    assert page.evaluate("window.pwned") is None
    assert len(polls) == polled, "the page does not poll while its stream is open"


STREAMED_REPLY = "Sure. **Steps** to start:\n\n" + " ".join(f"step{n}" for n in range(50))


def test_a_worker_reply_streams_into_the_page_then_shows_once(
    page: Page,
    tmp_path: Path,
    sqlite_url: str,
    fake_llm: FakeLLM,
    gateway_factory: Callable[..., GatewayServer],
) -> None:
    env = hubbub_env(
        db_url=sqlite_url, home=tmp_path, fake=fake_llm, llm_timeout=300, streaming="on"
    )
    gateway = gateway_factory(settings_from_env(env))
    fake_llm.stream_tokens_per_second = 5
    fake_llm.queue_replies(ScriptedReply(content=STREAMED_REPLY))
    page.goto(f"{gateway.base_url}/?c=browser-worker-stream")
    page.fill("#text", "how do I start?")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.user")).to_have_text("how do I start?")
    page.wait_for_function("streaming === true", timeout=60_000)

    draft = page.locator(".msg.draft")
    expect(draft).to_contain_text("step3")
    partial = draft.inner_text()
    assert "step49" not in partial, "the page showed the reply before it was complete"
    expect(draft.locator("strong")).to_have_text("Steps")

    reply = page.locator(".msg.assistant")
    expect(reply).to_contain_text("step49")
    expect(draft).to_have_count(0)
    expect(reply).to_have_count(1)
    expect(page.locator("#typing")).to_have_text("")
    assert fake_llm.chat_requests()[0].get("stream") is True
    page.reload()
    expect(page.locator(".msg")).to_have_count(2)
    expect(reply).to_contain_text("step49")
