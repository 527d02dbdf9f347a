"""TemplateVersion: one committed change of a prompt template (a write or a deletion)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class TemplateVersion(BaseModel):
    """One change of a template: its `version` (1, 2, ... per template, never reused), the
    `text` it set (None: the change deleted the template) and when it was made (UTC)."""

    model_config = ConfigDict(frozen=True)

    template_id: str
    version: int
    text: str | None
    at: datetime

    @property
    def deleted(self) -> bool:
        """True if this change deleted the template."""
        return self.text is None
