"""`agent-runtime serve`: the HTTP/SSE gateway under uvicorn, over a runtime of its own.

Refuses to start without a token (`[server.tokens]` or `--token`) unless `--insecure-no-auth`,
and then only on 127.0.0.1. The tools of `[server] tools` and `--tool` are imported before
the runtime starts (an entry that cannot be imported refuses the start, named) and
registered in `runtime.tools`. Connections are guarded (`agent_runtime.server._connections`:
`server.header_timeout`, `server.max_connections`). uvicorn's access log is off:
`/login?token=...` would write the token into it. On SIGINT/SIGTERM every open SSE stream
ends first (uvicorn waits for open responses), then the runtime stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import Any

LOOPBACK = "127.0.0.1"


def add_serve_command(commands: Any) -> None:
    """Register `serve` on the command table's subparsers."""
    serve = commands.add_parser(
        "serve",
        help="serve the HTTP/SSE gateway and the observer page (needs agent-runtime[server])",
        description="The JSON API, SSE event streams, /openapi.json and the observer page at "
        "/ over a runtime started from the config. Every route needs a bearer token: "
        "[server.tokens] in the config, or --token. Open the page with /login?token=TOKEN.",
    )
    serve.add_argument("--host", default=LOOPBACK, help="address to bind (127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port to bind (8000)")
    serve.add_argument(
        "--token",
        action="append",
        default=[],
        help="a bearer token for every session (repeatable; at least 16 characters)",
    )
    serve.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="a tool agents may be started with, as package.module:name (repeatable; added to "
        "[server] tools)",
    )
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without any token, on 127.0.0.1 only",
    )
    serve.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        help="path to a runtime TOML file (default: config/runtime.toml)",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; 2 for a refusal (the message says why)."""
    try:
        import uvicorn

        from agent_runtime.server import asgi_app
        from agent_runtime.server._connections import ConnectionGuard
    except ImportError as exc:
        return _refuse(f"the gateway needs its extra: pip install 'agent-runtime[server]' ({exc})")
    from agent_runtime._errors import ConfigError
    from agent_runtime.config import load_config
    from agent_runtime.runtime import Runtime
    from agent_runtime.server._app import tokens_of
    from agent_runtime.server._tools import load_tools, register_tools

    try:
        config = load_config(args.config)
        has_tokens = bool(tokens_of(config.server, args.token))
        tools = load_tools([*config.server.tools, *args.tool])
    except ConfigError as exc:
        return _refuse(str(exc))
    if not has_tokens and not args.insecure_no_auth:
        return _refuse(
            "no token: configure [server.tokens] or pass --token (or --insecure-no-auth, "
            "which binds only to 127.0.0.1)"
        )
    if not has_tokens and args.host != LOOPBACK:
        return _refuse(f"--insecure-no-auth binds only to {LOOPBACK}, not {args.host}")
    with Runtime.start(config, configure_logging=True) as runtime:
        try:
            register_tools(runtime.tools, tools)
        except ConfigError as exc:
            return _refuse(str(exc))
        app = asgi_app(runtime, tokens=args.token, insecure_no_auth=args.insecure_no_auth)
        hub = app.state.hub

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                if hub.loop is not None and not self.should_exit:
                    hub.loop.call_soon_threadsafe(lambda: asyncio.ensure_future(hub.close()))
                super().handle_exit(sig, frame)

        server = config.server
        guard = ConnectionGuard(server.header_timeout, server.max_connections)
        settings = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            access_log=False,
            log_level="warning",
            http=guard.protocol(),
            backlog=max(2048, server.max_connections),
        )
        print(f"agent-runtime gateway on http://{args.host}:{args.port}/", flush=True)
        # uvicorn raises the signal it handled again once it stopped: as KeyboardInterrupt
        # (SIGTERM too, instead of its default of killing the process), so the runtime stops.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            with contextlib.suppress(KeyboardInterrupt):
                Server(settings).run()
        finally:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535: argparse refuses anything else, naming it."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r} (expected 0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {port} (expected 0-65535)")
    return port


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _refuse(message: str) -> int:
    print(f"agent-runtime serve: {message}", file=sys.stderr)
    return 2
