"""The errors of prompt templates: one missing, or a parameter it needs not given."""

from __future__ import annotations

from agent_runtime._errors import AgentRuntimeError


class TemplateError(AgentRuntimeError):
    """A prompt template could not be used.

    Attributes:
        template_id: the template's id.
    """

    def __init__(self, template_id: str, message: str) -> None:
        super().__init__(message)
        self.template_id = template_id


class TemplateNotFound(TemplateError, LookupError):
    """No template has this id (it was never written, or it was deleted)."""

    def __init__(self, template_id: str) -> None:
        super().__init__(
            template_id,
            f"prompt template {template_id!r} not found (write it with templates.init or update)",
        )


class TemplateParameterMissing(TemplateError, KeyError):
    """The template's text has a `{name}` placeholder that was given no value.

    Attributes:
        parameter: the placeholder's name.
    """

    def __init__(self, template_id: str, parameter: str) -> None:
        super().__init__(
            template_id,
            f"prompt template {template_id!r} needs the parameter {parameter!r}, "
            "which was not given",
        )
        self.parameter = parameter

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])
