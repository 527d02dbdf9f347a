"""The process the SIGKILL test kills: `start` starts the `Journey` workflow and waits to be
killed (its `blocking` step hangs on the first attempt); `resume` resumes it in a new process
and writes what it resumed and the final info to result.json. Run in the test's directory
(the default SQLite file)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from agent_runtime import Runtime, RuntimeConfig
from agent_runtime.testing import wait_until
from tests.agent_runtime.workflows.sigkill_flow import Journey, JourneyState


def main(mode: str) -> None:
    runtime = Runtime.start(RuntimeConfig(), configure_logging=False)
    if mode == "start":
        runtime.workflows.start(Journey, JourneyState(), id="journey")
        threading.Event().wait()  # until SIGKILL
    resumed = runtime.workflows.resume()
    wait_until(
        lambda: runtime.workflows.get("journey").status == "completed", timeout=30, what="done"
    )
    info = runtime.workflows.get("journey").model_dump(mode="json")
    Path("result.json").write_text(json.dumps({"resumed": resumed, "info": info}))
    runtime.stop()


if __name__ == "__main__":
    main(sys.argv[1])
