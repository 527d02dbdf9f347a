"""The stateless agent loop (DESIGN.md 7): turns, streaming, tool batches, retry, transcript
checks. `run` is an async generator of events with no hidden state; `stream` runs it on a
runtime's event loop into a bounded EventStream."""

from agent_runtime.loop._output import OUTPUT_TOOL, OutputSpec
from agent_runtime.loop._run import continue_run, run
from agent_runtime.loop._stream import stream, stream_continue
from agent_runtime.loop._transcript import TranscriptState, validate_transcript
from agent_runtime.loop.types import AgentContext, LoopConfig, LoopHost, RetryPolicy

__all__ = [
    "OUTPUT_TOOL",
    "AgentContext",
    "LoopConfig",
    "LoopHost",
    "OutputSpec",
    "RetryPolicy",
    "TranscriptState",
    "continue_run",
    "run",
    "stream",
    "stream_continue",
    "validate_transcript",
]
