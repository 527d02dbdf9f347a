"""A process of the lease tests, in the test's directory (one SQLite file for all): `start`
starts the `Relay` workflow `relay`; then every process calls `resume()` every 0.1 s, printing
`PASS <n> <resumed ids>` after each; `follow` stops once `relay` is completed and writes its
final info to `result-<pid>.json` (`start` goes on until the test kills it). Leases last
argv[2] seconds."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from agent_runtime import Runtime, RuntimeConfig
from tests.agent_runtime.workflows.lease_flow import Relay, RelayState


def main(mode: str, lease: float) -> None:
    runtime = Runtime.start(RuntimeConfig())
    runtime.workflows.lease_seconds = lease
    if mode == "start":
        runtime.workflows.start(Relay, RelayState(), id="relay")
    passes = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        resumed = runtime.workflows.resume()
        passes += 1
        print(f"PASS {passes} {' '.join(resumed)}", flush=True)
        if mode == "follow" and runtime.workflows.get("relay").status == "completed":
            break
        time.sleep(0.1)
    info = runtime.workflows.get("relay").model_dump(mode="json")
    Path(f"result-{os.getpid()}.json").write_text(json.dumps(info))
    runtime.stop()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
