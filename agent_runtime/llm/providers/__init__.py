"""Provider adapters: each converts our messages to one wire format and back, over httpx."""
