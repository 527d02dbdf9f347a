"""PromptTemplates: prompt templates kept, with every change, in session memory's store."""

from __future__ import annotations

import threading
import weakref
from datetime import UTC, datetime

from agent_runtime.memory import SessionMemory
from agent_runtime.templates._errors import TemplateNotFound
from agent_runtime.templates._models import TemplateVersion
from agent_runtime.templates._subscription import TemplateSubscription
from agent_runtime.templates._template import Template, check_template_id, placeholders
from supervisors._log import get_logger

log = get_logger(__name__)

SESSION = "agent_runtime.templates"
"""The reserved session whose key-value state holds the templates (no history of its own)."""

_CURRENT = "current:"  # + id: the template's newest version (its text None once deleted)
_VERSION = "version:"  # + id + ":" + version (10 digits): each version, kept for good

_instances_lock = threading.Lock()
_instances: weakref.WeakKeyDictionary[SessionMemory, PromptTemplates] = weakref.WeakKeyDictionary()


class PromptTemplates:
    """Prompt templates by id, stored in a `SessionMemory`'s store (`runtime.templates`).

    ```python
    templates = runtime.templates
    templates.init("activity-agent", "You suggest things to do in {city}.")  # if missing
    templates.update("activity-agent", "You suggest outdoor things to do in {city}.")  # v2
    templates.get("activity-agent")            # the newest text; TemplateNotFound if none
    templates.history("activity-agent")        # [TemplateVersion(version=1, ...), ...]
    with templates.subscribe("activity-agent") as sub:
        change = sub.poll(timeout=1.0)         # the next TemplateVersion
    agent = runtime.start_agent(key, model=m, system_prompt=Template("activity-agent", city="Oslo"))
    ```

    Storage: the key-value state (see `SessionState`) of the reserved session
    `"agent_runtime.templates"` of the memory's store, so templates live wherever the
    store does (SQLite file, Postgres database, or in memory) and need no schema of their
    own. Each change is kept under its own key and never rewritten: `history(id)` reads
    every version ever written, deletions included; a template's newest version has a key
    of its own, so `get` is one read whatever the history's length.

    Guarantees:
    - a change returns once the store committed it (durable as the store is);
    - versions of a template count 1, 2, 3, ... across deletions (an `init` after a
      `delete` writes the next number);
    - thread-safe: the changes made through this object are serialised, and each is
      reported to `subscribe`rs in commit order. Changes made by another process on the
      same store are read by `get` and `history` but not reported, and two processes
      changing the same template at once may both write the same version number (the
      later wins): keep one writer process per template;
    - template texts are checked when written: `{name}` placeholders with plain names,
      `{{` and `}}` for literal braces; a text that fails is never stored.

    Use `PromptTemplates.of(memory)` (what `runtime.templates` returns) to share one object,
    and so one set of subscribers, per memory.

    Raises (every method):
        TypeError, ValueError: a bad id (see `check_template_id`) or text, or the store is
            closed.
        MemoryStoreError: the store failed to read or write.
    """

    def __init__(self, memory: SessionMemory) -> None:
        if not isinstance(memory, SessionMemory):
            raise TypeError(f"invalid memory {memory!r} (expected a SessionMemory)")
        self.memory = memory
        self._state = memory.kv(SESSION)
        self._lock = threading.Lock()  # serialises changes and the queueing of their reports
        self._subs: weakref.WeakSet[TemplateSubscription] = weakref.WeakSet()

    @classmethod
    def of(cls, memory: SessionMemory) -> PromptTemplates:
        """The one `PromptTemplates` of `memory` (made on first use, gone with it)."""
        with _instances_lock:
            found = _instances.get(memory)
            if found is None:
                found = _instances[memory] = cls(memory)
            return found

    # -- reads ------------------------------------------------------------------------------------

    def get(self, template_id: str) -> str:
        """The template's newest text.

        Raises:
            TemplateNotFound: it was never written, or it was deleted.
        """
        text = self.get_optional(template_id)
        if text is None:
            raise TemplateNotFound(template_id)
        return text

    def get_optional(self, template_id: str) -> str | None:
        """The template's newest text, or None when there is none (never written, deleted)."""
        current = self.current(template_id)
        return None if current is None else current.text

    def current(self, template_id: str) -> TemplateVersion | None:
        """The template's newest version (a deletion: `text` None), or None if never written."""
        raw = self._state.get(_CURRENT + check_template_id(template_id))
        return None if raw is None else _version(template_id, raw)

    def history(self, template_id: str) -> list[TemplateVersion]:
        """Every version of the template, oldest first (empty if never written). Reads the
        whole template store: for inspection, not for each run."""
        prefix = _VERSION + check_template_id(template_id) + ":"
        found = [
            _version(template_id, raw)
            for key, raw in self._state.items().items()
            if key.startswith(prefix) and key[len(prefix) :].isdigit()
        ]
        return sorted(found, key=lambda v: v.version)

    def ids(self) -> list[str]:
        """The ids of the templates that exist (written and not deleted), sorted."""
        return sorted(
            key[len(_CURRENT) :]
            for key, raw in self._state.items().items()
            if key.startswith(_CURRENT) and raw.get("text") is not None
        )

    def render(self, template: Template) -> str:
        """`template`'s stored text with its parameters filled in.

        Raises:
            TemplateNotFound: no template has its id.
            TemplateParameterMissing: the text has a placeholder `template` gives no value.
        """
        if not isinstance(template, Template):
            raise TypeError(f"invalid template {template!r} (expected a Template)")
        return template.render(self.get(template.id))

    # -- changes ----------------------------------------------------------------------------------

    def init(self, template_id: str, text: str) -> bool:
        """Write `text` as the template unless it exists; True if it was written (the
        defaults of an application, written at every start, never undo a later update)."""
        placeholders(check_template_id(template_id), text)
        with self._lock:
            current = self.current(template_id)
            if current is not None and current.text is not None:
                return False
            self._write(template_id, text, current)
        return True

    def update(self, template_id: str, text: str) -> int:
        """Write `text` as the template's new version (creating it if needed); return the
        version number. Agents with a `Template` of this id use it from their next run."""
        placeholders(check_template_id(template_id), text)
        with self._lock:
            return self._write(template_id, text, self.current(template_id)).version

    def delete(self, template_id: str) -> bool:
        """Delete the template (its history is kept, ending in a deletion version); True if
        it existed. Runs of agents that use it then fail to start with `TemplateNotFound`."""
        check_template_id(template_id)
        with self._lock:
            current = self.current(template_id)
            if current is None or current.text is None:
                return False
            self._write(template_id, None, current)
        return True

    def subscribe(
        self, template_id: str | None = None, *, max_queue: int = 1000
    ) -> TemplateSubscription:
        """A subscription to the changes made through this object from now on, of the
        template `template_id`, or of every template when None (see `TemplateSubscription`).
        """
        if template_id is not None:
            check_template_id(template_id)
        sub = TemplateSubscription(template_id, max_queue=max_queue, on_close=self._forget)
        with self._lock:
            self._subs.add(sub)
        return sub

    def _write(
        self, template_id: str, text: str | None, current: TemplateVersion | None
    ) -> TemplateVersion:
        """Store the next version (its own key first, then the newest-version key) and
        report it; under `self._lock`."""
        version = TemplateVersion(
            template_id=template_id,
            version=1 if current is None else current.version + 1,
            text=text,
            at=datetime.now(UTC),
        )
        raw = {"version": version.version, "text": text, "at": version.at.isoformat()}
        self._state.put(f"{_VERSION}{template_id}:{version.version:010d}", raw)
        self._state.put(_CURRENT + template_id, raw)
        for sub in list(self._subs):
            if sub.wants(version) and not sub.offer(version):
                self._subs.discard(sub)
        log.info(
            "templates.changed",
            template_id=template_id,
            version=version.version,
            deleted=text is None,
        )
        return version

    def _forget(self, sub: TemplateSubscription) -> None:
        with self._lock:
            self._subs.discard(sub)

    def __repr__(self) -> str:
        return f"<PromptTemplates store={self.memory.store!r}>"


def _version(template_id: str, raw: object) -> TemplateVersion:
    """The `TemplateVersion` stored as `raw` (the JSON object `_write` put)."""
    if not isinstance(raw, dict):
        raise ValueError(f"prompt template {template_id!r}: a stored version is not an object")
    return TemplateVersion(
        template_id=template_id,
        version=raw["version"],
        text=raw["text"],
        at=datetime.fromisoformat(raw["at"]),
    )
