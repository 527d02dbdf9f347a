"""The changes `ProviderConfiguration` makes to the `[llm]` profiles and fallback pools.

Each change is a small frozen pydantic model with a `type` tag (so an admin endpoint can take
one as JSON: `ConfigChange` is their discriminated union) that can say what it does
(`summary`), whether it destroys something (`confirmation`, the exact text that confirms it)
and how it edits a tomlkit document of the config file (`edit`), keeping every comment and
the layout of everything it does not touch.

No change carries a credential: a profile names the environment variable that holds its key
(`api_key_env`, checked to look like a variable name), a `base_url` with a password or a key
in its query is refused, and no error repeats a value it was given.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
)
from tomlkit import TOMLDocument, inline_table, nl, table
from tomlkit.items import Array, Table

from agent_runtime._errors import ConfigError
from agent_runtime.config import LLMConfig, ModelPricingConfig, ModelProfile


class InvalidConfigChange(ConfigError):
    """A change to the provider configuration was refused before anything was written.

    `problems` lists each reason, naming the field or key and what is wrong with it, never the
    value given (a value in the wrong field may be a secret).
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid provider configuration change: " + "; ".join(problems))


Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""A profile or pool name: a bare TOML key of letters, digits, `_` and `-` (1-64 characters)."""

_ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "signature", "sig", "auth")


def _check_api_key_env(value: str | None) -> str | None:
    if value is not None and not _ENV_VAR.fullmatch(value):
        # The value is not repeated: a key pasted here by mistake must not reach a log.
        raise ValueError(
            "api_key_env must name the environment variable that holds the key (letters, "
            "digits and _, e.g. OPENAI_API_KEY), never the key itself"
        )
    return value


def _check_base_url(value: str | None) -> str | None:
    if value is None:
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("base_url must be an http:// or https:// URL")
    secret_query = any(
        any(word in name.lower() for word in _SECRET_WORDS) for name, _ in parse_qsl(parts.query)
    )
    if parts.password is not None or secret_query:
        raise ValueError(
            "base_url must not carry a credential (a user:password@ or a key in the query): put "
            "the key in the environment variable that api_key_env names"
        )
    return value


class _Change(BaseModel):
    # Errors never show the input: a value in the wrong field may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    def summary(self) -> str:
        """One line saying what the change does."""
        raise NotImplementedError

    def confirmation(self) -> str | None:
        """The exact text `apply(..., confirm=)` needs, for a change that removes something."""
        return None

    def edit(self, document: TOMLDocument, current: LLMConfig) -> str | None:
        """Make the change in `document`, whose `[llm]` section `current` is; return a note on
        what else it had to do (None when nothing).

        Raises:
            InvalidConfigChange: the change does not fit the configuration as it is.
        """
        raise NotImplementedError


class AddProfile(_Change):
    """Add the profile `name` (refused when it exists: update it instead)."""

    type: Literal["add_profile"] = "add_profile"
    name: Name
    profile: ModelProfile

    @field_validator("profile")
    @classmethod
    def _check_profile(cls, profile: ModelProfile) -> ModelProfile:
        _check_api_key_env(profile.api_key_env)
        _check_base_url(profile.base_url)
        return profile

    def summary(self) -> str:
        return f"add profile {self.name} ({self.profile.provider}, model {self.profile.model!r})"

    def edit(self, document: TOMLDocument, current: LLMConfig) -> str | None:
        if self.name in current.profiles:
            raise InvalidConfigChange(
                [f"profile {self.name!r} exists already: update it, or choose another name"]
            )
        if self.name in current.pools:
            raise InvalidConfigChange([f"{self.name!r} is the name of a pool"])
        fields = self.profile.model_dump(exclude_unset=True, exclude_none=True)
        profiles, note = _profiles(document, current)
        profiles[self.name] = _profile_table(fields)
        return note


class UpdateProfile(_Change):
    """Set the given fields of profile `name`; a field given as None is removed (it takes its
    default again). Fields not given stay as they are, with their comments."""

    type: Literal["update_profile"] = "update_profile"
    name: Name
    provider: str | None = Field(default=None, min_length=1)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    pricing: ModelPricingConfig | None = None
    plugin: str | None = None

    @field_validator("api_key_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        return _check_api_key_env(value)

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A field left out means "keep", None means "remove": the JSON form keeps them apart.
        data: dict[str, Any] = handler(self)
        given = self.model_fields_set | {"type", "name"}
        return {key: value for key, value in data.items() if key in given}

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return _check_base_url(value)

    def updates(self) -> dict[str, Any]:
        """`{field: new value or None (remove)}` of the fields this change sets."""
        return {
            name: getattr(self, name) for name in sorted(self.model_fields_set - {"type", "name"})
        }

    def summary(self) -> str:
        fields = ", ".join(
            f"remove {name}" if value is None else f"set {name}"
            for name, value in self.updates().items()
        )
        return f"update profile {self.name}: {fields}"

    def edit(self, document: TOMLDocument, current: LLMConfig) -> str | None:
        updates = self.updates()
        problems = []
        if not updates:
            problems.append("an update_profile change must set or remove at least one field")
        if "provider" in updates and updates["provider"] is None:
            problems.append("provider cannot be removed: every profile names its kind")
        if self.name not in current.profiles:
            known = ", ".join(sorted(current.profiles)) or "none"
            problems.append(f"no profile {self.name!r} to update (configured profiles: {known})")
        if problems:
            raise InvalidConfigChange(problems)
        profiles, note = _profiles(document, current)
        profile = profiles[self.name]
        for field, value in updates.items():
            if value is None:
                if field in profile:
                    del profile[field]
            elif isinstance(value, ModelPricingConfig):
                profile[field] = _inline(value.model_dump())
            else:
                profile[field] = value
        return note


class RemoveProfile(_Change):
    """Remove profile `name`; destructive, so `apply` needs its confirmation. Refused while a
    pool has it as a member."""

    type: Literal["remove_profile"] = "remove_profile"
    name: Name

    def summary(self) -> str:
        return f"remove profile {self.name}"

    def confirmation(self) -> str:
        return f"remove profile {self.name}"

    def edit(self, document: TOMLDocument, current: LLMConfig) -> str | None:
        if self.name not in current.profiles:
            known = ", ".join(sorted(current.profiles)) or "none"
            raise InvalidConfigChange(
                [f"no profile {self.name!r} to remove (configured profiles: {known})"]
            )
        pools = sorted(name for name, pool in current.pools.items() if self.name in pool.members)
        if pools:
            raise InvalidConfigChange(
                [
                    f"profile {self.name!r} is a member of pool(s) {', '.join(pools)}: remove it "
                    "from them first"
                ]
            )
        profiles, note = _profiles(document, current)
        del profiles[self.name]
        return note


class AddPoolMember(_Change):
    """Add profile `profile` to fallback pool `pool` (created when it does not exist), at
    `position` in its order (default: last)."""

    type: Literal["add_pool_member"] = "add_pool_member"
    pool: Name
    profile: Name
    position: int | None = Field(default=None, ge=0)

    def summary(self) -> str:
        where = "last" if self.position is None else f"at position {self.position}"
        return f"add {self.profile} to pool {self.pool} ({where})"

    def edit(self, document: TOMLDocument, current: LLMConfig) -> str | None:
        if self.profile not in current.profiles:
            known = ", ".join(sorted(current.profiles)) or "none"
            raise InvalidConfigChange(
                [
                    f"no profile {self.profile!r} to add to pool {self.pool!r} (configured "
                    f"profiles: {known})"
                ]
            )
        existing = current.pools.get(self.pool)
        if existing is not None and self.profile in existing.members:
            raise InvalidConfigChange(
                [f"profile {self.profile!r} is a member of pool {self.pool!r} already"]
            )
        pools = _table(_llm(document), "pools")
        if existing is None:
            pool = table()
            pool["members"] = [self.profile]
            pool.add(nl())
            pools[self.pool] = pool
            return f"pool {self.pool} is new"
        members = _members(pools, self.pool)
        if self.position is None or self.position >= len(members):
            members.append(self.profile)
        elif "\n" in members.as_string():
            members.insert(self.position, self.profile)  # one member a line: kept so
        else:
            # tomlkit's insert into a one-line array drops the separator's space.
            names = [str(member) for member in members]
            names.insert(self.position, self.profile)
            pools[self.pool]["members"] = names
        return None


class RemovePoolMember(_Change):
    """Remove profile `profile` from pool `pool` (the pool with it, if it was the last member);
    destructive, so `apply` needs its confirmation."""

    type: Literal["remove_pool_member"] = "remove_pool_member"
    pool: Name
    profile: Name

    def summary(self) -> str:
        return f"remove {self.profile} from pool {self.pool}"

    def confirmation(self) -> str:
        return f"remove {self.profile} from pool {self.pool}"

    def edit(self, document: TOMLDocument, current: LLMConfig) -> str | None:
        existing = current.pools.get(self.pool)
        if existing is None:
            known = ", ".join(sorted(current.pools)) or "none"
            raise InvalidConfigChange([f"no pool {self.pool!r} (configured pools: {known})"])
        if self.profile not in existing.members:
            raise InvalidConfigChange(
                [
                    f"profile {self.profile!r} is not a member of pool {self.pool!r} (members: "
                    f"{', '.join(existing.members)})"
                ]
            )
        pools = _table(_llm(document), "pools")
        if existing.members == [self.profile]:
            del pools[self.pool]  # a pool has at least one member
            if not pools:
                del _llm(document)["pools"]
            return f"it was the last member: pool {self.pool} is removed"
        _members(pools, self.pool).remove(self.profile)
        return None


ConfigChange = Annotated[
    AddProfile | UpdateProfile | RemoveProfile | AddPoolMember | RemovePoolMember,
    Field(discriminator="type"),
]
"""One change to the provider configuration, told apart by its `type`."""


# -- the document ------------------------------------------------------------------------------


def _llm(document: TOMLDocument) -> Table:
    if "llm" not in document:
        document.add("llm", table())
    llm = document["llm"]
    if not isinstance(llm, Table):
        raise InvalidConfigChange(["[llm] of the config file is not a table"])
    return llm


def _table(parent: Table, key: str) -> Table:
    """`parent[key]` as a table of tables, created (as `[parent.key.<name>]` headers) if absent."""
    if key not in parent:
        parent[key] = table(is_super_table=True)
    child = parent[key]
    if not isinstance(child, Table):
        raise InvalidConfigChange(
            [f"llm.{key} of the config file is an inline table: make it a [llm.{key}.<name>] table"]
        )
    return child


def _profiles(document: TOMLDocument, current: LLMConfig) -> tuple[Table, str | None]:
    """The profiles table, and a note when it had to be made: a file without one gets
    `current`'s profiles (the built-in ones) written out first, as a table holding only the
    changed profile would drop them."""
    llm = _llm(document)
    if "profiles" in llm:
        return _table(llm, "profiles"), None
    profiles = _table(llm, "profiles")
    for name, profile in current.profiles.items():
        profiles[name] = _profile_table(profile.model_dump(exclude_none=True))
    return profiles, "the file had no [llm.profiles]: the built-in profiles are written out first"


def _profile_table(fields: dict[str, Any]) -> Table:
    profile = table()
    for key, value in fields.items():
        profile[key] = _inline(value) if isinstance(value, dict) else value
    profile.add(nl())
    return profile


def _inline(values: dict[str, Any]) -> Any:
    inline = inline_table()
    inline.update(values)
    return inline


def _members(pools: Table, name: str) -> Array:
    pool = pools[name]
    members = pool.get("members") if isinstance(pool, Table) else None
    if not isinstance(members, Array):
        raise InvalidConfigChange([f"llm.pools.{name}.members of the config file is not an array"])
    return members
