"""agent_runtime.mcp against a real MCP server built with the SDK (issue 16, "MCP tools").

The server (tests/agent_runtime/mcp_test_server.py) runs as a subprocess: over streamable
HTTP on 127.0.0.1 on a free port, stopped by its PID when the test ends (failed or not), or
over stdio, started by the SDK for each session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_runtime import Runtime
from agent_runtime.abort import AbortSignal
from agent_runtime.config import AgentConfig
from agent_runtime.mcp import (
    CallNext,
    McpCall,
    McpServerError,
    mcp_stdio_tools,
    mcp_stdio_tools_sync,
    mcp_tools,
    mcp_tools_sync,
)
from agent_runtime.messages import ToolCall, ToolResult, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, execute_tool_call

SERVER = Path(__file__).with_name("mcp_test_server.py")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class HttpServer:
    url: str
    marks: Path
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    port = _free_port()
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port), str(tmp_path)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    running = HttpServer(f"http://127.0.0.1:{port}/mcp", tmp_path, process)
    try:
        wait_until(
            lambda: process.poll() is not None or _accepts(port), timeout=60, what="MCP server"
        )
        assert process.poll() is None, (tmp_path / "server.log").read_text()
        yield running
    finally:
        running.stop()
        log.close()


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    # A long abort grace: a run aborted during an MCP call ends promptly only if the call
    # itself is cancelled, not because the loop gave up on it.
    return make_runtime(agent=AgentConfig(abort_grace=60))


def text(result: ToolResult | ToolResultMessage) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


def call(
    tools: list[Tool], tool_name: str, /, signal: AbortSignal | None = None, **arguments: object
) -> ToolResult:
    ctx = ToolContext("c1", tool_name, signal=signal)
    request = ToolCall(id="c1", name=tool_name, arguments=arguments)
    return asyncio.run(execute_tool_call(request, tools, ctx))


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


def test_the_servers_tools_come_with_its_schemas_and_descriptions(server: HttpServer) -> None:
    tools = by_name(asyncio.run(mcp_tools(server.url)))
    assert set(tools) == {"add", "crash", "fail", "dotted_name", "header", "pid", "slow"}
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["properties"].keys() == {"a", "b"}
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.parallel_safe  # the server marks it read-only
    assert not tools["fail"].parallel_safe


def test_a_call_goes_to_the_server_with_the_headers(server: HttpServer) -> None:
    tools = mcp_tools_sync(server.url, headers={"X-Test-Token": "secret-1"})
    result = call(tools, "add", a=2, b=40)
    assert not result.is_error and text(result) == "42"
    assert result.trust == "untrusted"
    assert result.details is not None and result.details["structured"] == {"result": 42}
    assert text(call(tools, "header", name="x-test-token")) == "secret-1"
    # A name providers reject is renamed agent-side; the call still uses the server's name.
    assert text(call(tools, "dotted_name")) == "dotted ok"


def test_the_allow_list_offers_only_the_named_tools(server: HttpServer) -> None:
    tools = mcp_tools_sync(server.url, allowed=["add", "dotted.name"])
    assert sorted(t.name for t in tools) == ["add", "dotted_name"]
    assert call(tools, "fail", message="x").details["outcome"] == "not_found"  # type: ignore[index]


def test_an_unknown_allowed_name_is_an_error_naming_it(server: HttpServer) -> None:
    with pytest.raises(
        ValueError, match=r"no tool named 'sbutract' \(it lists: add, crash, dotted.name, fail"
    ):
        mcp_tools_sync(server.url, allowed=["add", "sbutract"])
    with pytest.raises(TypeError, match="not the string"):
        mcp_tools_sync(server.url, allowed="add")


def test_an_is_error_result_becomes_an_error_result(server: HttpServer) -> None:
    result = call(mcp_tools_sync(server.url), "fail", message="the disk is full")
    assert result.is_error
    assert "the disk is full" in text(result)
    assert result.details is not None and result.details["outcome"] == "mcp_tool_error"


def test_a_protocol_error_becomes_an_error_result(server: HttpServer) -> None:
    async def rename(c: McpCall, call_next: CallNext) -> ToolResult:
        return await call_next(dataclasses.replace(c, tool="no_such_tool"))

    result = call(mcp_tools_sync(server.url, interceptor=rename), "add", a=1, b=2)
    assert result.is_error
    assert "no_such_tool" in text(result)
    assert result.details is not None
    assert result.details["outcome"] in ("mcp_protocol_error", "mcp_tool_error")


def test_a_server_gone_becomes_an_error_result_and_a_listing_error_names_it(
    server: HttpServer,
) -> None:
    tools = mcp_tools_sync(server.url)
    server.stop()
    result = call(tools, "add", a=1, b=2)
    assert result.is_error
    assert result.details is not None and result.details["outcome"] == "mcp_unavailable"
    assert server.url in text(result)
    with pytest.raises(McpServerError, match=f"MCP server {server.url}: listing its tools failed"):
        mcp_tools_sync(server.url)


def test_the_interceptor_sees_and_changes_calls_and_results(server: HttpServer) -> None:
    seen: list[tuple[str, str, dict[str, object]]] = []

    async def interceptor(c: McpCall, call_next: CallNext) -> ToolResult:
        seen.append((c.server, c.tool, dict(c.arguments)))
        if c.tool == "fail":
            return ToolResult.text("blocked by policy", is_error=True)
        doubled = {k: v * 2 for k, v in c.arguments.items()}  # type: ignore[operator]
        result = await call_next(dataclasses.replace(c, arguments=doubled))
        return result.model_copy(
            update={"content": [*result.content, *ToolResult.text("!").content]}
        )

    tools = mcp_tools_sync(server.url, interceptor=interceptor)
    assert text(call(tools, "add", a=1, b=2)) == "6!"
    assert text(call(tools, "fail", message="x")) == "blocked by policy"
    assert seen == [(server.url, "add", {"a": 1, "b": 2}), (server.url, "fail", {"message": "x"})]


def test_an_abort_cancels_the_in_flight_call_on_the_server(server: HttpServer) -> None:
    tools = mcp_tools_sync(server.url)
    signal = AbortSignal()
    threading.Thread(
        target=lambda: (
            wait_until(lambda: (server.marks / "started").exists(), 60),
            signal.abort("stop"),
        ),
        daemon=True,
    ).start()
    result = call(tools, "slow", signal=signal, seconds=600)
    assert result.is_error and result.details is not None
    assert result.details["outcome"] == "aborted"
    assert "was cancelled: the run was aborted (stop)" in text(result)
    wait_until(lambda: (server.marks / "cancelled").exists(), 60, what="the server's cancellation")


def test_a_call_on_an_already_aborted_signal_is_not_sent(server: HttpServer) -> None:
    tools = mcp_tools_sync(server.url)
    signal = AbortSignal()
    signal.abort("early")
    result = call(tools, "slow", signal=signal, seconds=600)
    assert result.details is not None and result.details["outcome"] == "aborted"
    assert not (server.marks / "started").exists()


def test_an_agent_run_calls_an_mcp_tool(server: HttpServer, runtime: Runtime) -> None:
    tools = mcp_tools_sync(server.url)
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 20, "b": 22})]),
            "the answer is 42",
        ]
    )
    agent = runtime.start_agent(("s", "mcp", 0), model=model, tools=tools)
    result = agent.run("add them", timeout=60)
    assert result.text == "the answer is 42"
    (answer,) = [m for m in result.new_messages if isinstance(m, ToolResultMessage)]
    assert text(answer) == "42" and not answer.is_error
    # The model saw the server's schema.
    (spec,) = [s for s in model.requests[0].tools if s.name == "add"]
    assert spec.parameters["required"] == ["a", "b"]


def test_aborting_a_run_cancels_its_mcp_call(server: HttpServer, runtime: Runtime) -> None:
    tools = mcp_tools_sync(server.url)
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ToolCall(id="c1", name="slow", arguments={"seconds": 600})])]
    )
    agent = runtime.start_agent(("s", "mcp", 0), model=model, tools=tools)
    agent.prompt("wait")
    wait_until(lambda: (server.marks / "started").exists(), 60, what="the call to start")
    agent.abort()
    agent.wait_for_idle(timeout=60)
    (answer,) = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
    assert answer.is_error and "was cancelled: the run was aborted" in text(answer)
    wait_until(lambda: (server.marks / "cancelled").exists(), 60, what="the server's cancellation")


def stdio_args(marks: Path) -> list[str]:
    return [str(SERVER), "stdio", str(marks)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stdio_tools_call_a_server_started_as_a_subprocess(tmp_path: Path) -> None:
    with mcp_stdio_tools_sync(
        sys.executable, stdio_args(tmp_path), allowed=["add", "header", "pid"]
    ) as tools:
        assert sorted(t.name for t in tools) == ["add", "header", "pid"]
        assert text(call(tools, "add", a=3, b=4)) == "7"
        assert text(call(tools, "header", name="x")) == "<stdio>"
    with pytest.raises(ValueError, match="no tool named 'nope'"):
        asyncio.run(mcp_stdio_tools(sys.executable, stdio_args(tmp_path), allowed=["nope"]))


def test_one_stdio_server_serves_every_call_until_closed(tmp_path: Path) -> None:
    tools = mcp_stdio_tools_sync(sys.executable, stdio_args(tmp_path))
    try:
        first = int(text(call(tools, "pid")))
        assert int(text(call(tools, "pid"))) == first  # from another event loop, too
        assert alive(first)
    finally:
        tools.close()
    wait_until(lambda: not alive(first), 30, what="the server process to stop")
    after = call(tools, "pid")
    assert after.is_error and "closed" in text(after)
    tools.close()  # idempotent


def test_a_stdio_server_that_exits_fails_its_call_and_the_next_call_restarts_it(
    tmp_path: Path,
) -> None:
    with mcp_stdio_tools_sync(sys.executable, stdio_args(tmp_path)) as tools:
        first = int(text(call(tools, "pid")))
        crashed = call(tools, "crash")
        assert crashed.is_error
        assert crashed.details is not None and crashed.details["outcome"] == "mcp_unavailable"
        wait_until(lambda: not alive(first), 30, what="the crashed server to be gone")
        second = int(text(call(tools, "pid")))
        assert second != first


def test_closing_stdio_tools_ends_a_call_in_flight_with_an_error_result(tmp_path: Path) -> None:
    tools = mcp_stdio_tools_sync(sys.executable, stdio_args(tmp_path))
    results: list[ToolResult] = []
    caller = threading.Thread(target=lambda: results.append(call(tools, "slow", seconds=600)))
    caller.start()
    try:
        wait_until(lambda: (tmp_path / "started").exists(), 60, what="the call to start")
    finally:
        tools.close()
    caller.join(60)
    assert not caller.is_alive()
    (result,) = results
    assert result.is_error


def test_stdio_tools_close_asynchronously(tmp_path: Path) -> None:
    async def use() -> int:
        async with await mcp_stdio_tools(sys.executable, stdio_args(tmp_path)) as tools:
            request = ToolCall(id="c1", name="pid")
            result = await execute_tool_call(request, tools, ToolContext("c1", "pid"))
            return int(text(result))

    pid = asyncio.run(use())
    wait_until(lambda: not alive(pid), 30, what="the server process to stop")


def test_a_stdio_command_that_does_not_start_is_a_listing_error(tmp_path: Path) -> None:
    with pytest.raises(McpServerError, match="no-such-mcp-server"):
        mcp_stdio_tools_sync(str(tmp_path / "no-such-mcp-server"))


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="http:// or https:// URL"):
        mcp_tools_sync("localhost:8000/mcp")
    with pytest.raises(TypeError, match="headers"):
        mcp_tools_sync("http://127.0.0.1:1/mcp", headers={"x": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="args must be a sequence"):
        mcp_stdio_tools_sync("python", "server.py")

    async def on_a_loop() -> None:
        mcp_tools_sync("http://127.0.0.1:1/mcp")

    with pytest.raises(RuntimeError, match="await mcp_tools"):
        asyncio.run(on_a_loop())


def test_the_package_imports_without_the_sdk_and_names_the_extra_when_used() -> None:
    script = (
        "import sys; sys.modules['mcp'] = None\n"
        "import agent_runtime.mcp as m\n"
        "try:\n"
        "    m.mcp_tools_sync('http://127.0.0.1:1/mcp')\n"
        "except ImportError as e:\n"
        "    print('IMPORT-ERROR', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "IMPORT-ERROR" in out.stdout and "agent-runtime[mcp]" in out.stdout


def test_mcp_tools_can_require_approval_by_name(server: HttpServer, runtime: Runtime) -> None:
    tools = mcp_tools_sync(server.url, requires_approval=["add"])
    assert by_name(tools)["add"].requires_approval is True
    assert by_name(tools)["fail"].requires_approval is False
    with pytest.raises(TypeError, match="collection of tool names"):
        mcp_tools_sync(server.url, requires_approval="add")  # type: ignore[arg-type]
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})]),
            "three",
        ]
    )
    agent = runtime.start_agent(("s", "mcp", 0), model=model, tools=tools)
    agent.prompt("add")
    wait_until(lambda: [p.tool_call_id for p in agent.state().pending_approvals] == ["c1"])
    agent.approve("c1", by="ops")
    agent.wait_for_idle(timeout=60)
    (answer,) = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
    assert text(answer) == "3"
