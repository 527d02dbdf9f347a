"""The optional HTTP/SSE gateway (`pip install agent-runtime[server]`)."""
