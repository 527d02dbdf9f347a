"""Prompt templates changeable at runtime: texts with `{name}` placeholders, kept with every
change in session memory's store, resolved by agents at the start of each run.

```python
from agent_runtime import Template
templates = runtime.templates                              # PromptTemplates.of(runtime.memory)
templates.init("activity-agent", "Suggest things to do in {city}.")   # only if missing
agent = runtime.start_agent(key, model=m, system_prompt=Template("activity-agent", city="Oslo"))
templates.update("activity-agent", "Suggest outdoor things to do in {city}.")
agent.run("Any ideas?")                                    # runs with the new version
templates.history("activity-agent")                        # [TemplateVersion(1), (2)]
```

An agent whose `system_prompt` is a `Template` renders it at the start of each run; a
template that does not exist, or a placeholder without a parameter, fails that run's start
with `TemplateNotFound` / `TemplateParameterMissing` naming the template (and parameter).
"""

from agent_runtime.templates._errors import (
    TemplateError,
    TemplateNotFound,
    TemplateParameterMissing,
)
from agent_runtime.templates._models import TemplateVersion
from agent_runtime.templates._store import SESSION, PromptTemplates
from agent_runtime.templates._subscription import TemplateSubscription
from agent_runtime.templates._template import Template, check_template_id

__all__ = [
    "SESSION",
    "PromptTemplates",
    "Template",
    "TemplateError",
    "TemplateNotFound",
    "TemplateParameterMissing",
    "TemplateSubscription",
    "TemplateVersion",
    "check_template_id",
]
