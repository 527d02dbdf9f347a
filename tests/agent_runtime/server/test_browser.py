"""The observer page in a real browser: headless Chromium (Debian's `chromium`, never a browser
Playwright downloads) logs in, watches an agent's run stream onto the page, and aborts it with
the page's Abort button."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(
        "needs Debian's Chromium at /usr/bin/chromium: apt-get install chromium",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="needs playwright: pip install --group dev"
)

from agent_runtime.testing import wait_until  # noqa: E402

from .harness import ADMIN, Gateway, gateway  # noqa: E402

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 30_000


@pytest.fixture
def gw() -> Iterator[Gateway]:
    with gateway() as served:
        served.start("web/main/0", model="slow")
        yield served


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
        )
        try:
            context.set_default_timeout(TIMEOUT_MS)
            yield context.new_page()
        finally:
            context.close()


def test_the_page_shows_an_agent_running_and_aborts_it(gw: Gateway, page: Any) -> None:
    expect = sync_api.expect
    page.goto(f"{gw.url}/login?token={ADMIN}")
    assert page.url == f"{gw.url}/"  # the cookie is set, the token is out of the address bar
    row = page.locator('tr[data-key="web/main/0"]')
    expect(row).to_be_visible()
    row.click()
    expect(page.locator("#selected")).to_have_text("web/main/0")

    page.fill("#prompt-text", "count for me")
    page.click("#prompt")
    # The run streams onto the page: the answer grows, the tree shows it running.
    expect(page.locator("#answer")).to_contain_text("tick5")
    expect(row.locator("td").nth(1)).to_have_text("running")
    expect(page.locator("#log")).to_contain_text("message_update")
    page.screenshot(path=str(Path(os.environ.get("GATEWAY_SCREENSHOT", "running.png"))))

    page.click("#abort")
    expect(page.locator("#log")).to_contain_text(re.compile(r"canceled user_abort"))
    expect(row.locator("td").nth(1)).to_have_text("idle")
    key = ("web", "main", 0)
    wait_until(lambda: gw.runtime.tree().agent(key).status == "idle", timeout=10)
    state = gw.runtime.registry.lookup(key).state()
    assert not state.is_running
    assert state.messages[0].text == "count for me"  # the page's prompt reached the agent


@pytest.fixture
def mail_gw() -> Iterator[tuple[Gateway, Any]]:
    from agent_runtime import tool
    from agent_runtime.messages import ToolCall
    from agent_runtime.testing import ScriptedModel, ScriptedTurn

    @tool(requires_approval=True)
    def send_mail(to: str) -> str:
        """Send a mail."""
        return f"sent to {to}"

    turn = ScriptedTurn(tool_calls=[ToolCall(id="c1", name="send_mail", arguments={"to": "bob"})])
    with gateway() as served:  # started before the page: playwright runs a loop on this thread
        agent = served.runtime.start_agent(
            ("mail", "main", 0), model=ScriptedModel([turn, "mailed"]), tools=[send_mail]
        )
        yield served, agent


def test_the_page_approves_a_waiting_tool_call(mail_gw: tuple[Gateway, Any], page: Any) -> None:
    from agent_runtime.messages import ToolResultMessage

    gw, agent = mail_gw
    expect = sync_api.expect
    page.goto(f"{gw.url}/login?token={ADMIN}")
    page.locator('tr[data-key="mail/main/0"]').click()
    expect(page.locator("#selected")).to_have_text("mail/main/0")
    page.fill("#prompt-text", "mail bob")
    page.click("#prompt")
    control = page.locator("#approval-c1")
    expect(control).to_contain_text("send_mail")
    control.get_by_role("button", name="Approve").click()
    expect(page.locator("#log")).to_contain_text("send_mail approved by admin")
    expect(control).to_have_count(0)
    wait_until(lambda: not agent.state().is_running, timeout=10)
    results = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
    assert results[0].text == "sent to bob"
