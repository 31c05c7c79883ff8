"""Reading configuration files: YAML validated once, at the door, into frozen typed objects.

Every configuration (a run, an archive batch, an experiment) is read by :func:`load`: the same
YAML errors, the same rule for empty sections, and every validation failure as one line that
names the dotted key, what was found and what to change (with the nearest valid key suggested
for typos), so a user never sees a pydantic traceback.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import ConfigError

__all__ = ["ConfigSection", "load", "parse", "read_yaml"]

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigSection(BaseModel):
    """Base of every configuration section and file: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_yaml(self) -> str:
        """The fully resolved configuration (defaults filled in) as YAML, for the run log."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def load(
    path: str | Path,
    model: type[ModelT],
    *,
    what: str = "config file",
    program_keys: Mapping[str, Any] | None = None,
) -> ModelT:
    """Read and validate a YAML configuration file.

    Parameters
    ----------
    path
        The YAML file.
    model
        The configuration model to validate into.
    what
        How the file is named in messages ("config file", "archive config", ...).
    program_keys
        Keys the program fills in (never users), see :func:`parse`.

    Returns
    -------
    ModelT
        The frozen, fully validated configuration.

    Raises
    ------
    ConfigError
        The file is missing or not YAML, or a key is unknown, missing or of the wrong type.
    """
    return parse(read_yaml(path, what), model, source=str(path), program_keys=program_keys)


def parse(
    data: Any,
    model: type[ModelT],
    *,
    source: str = "<config>",
    program_keys: Mapping[str, Any] | None = None,
) -> ModelT:
    """Validate an already parsed configuration mapping (see :func:`load`).

    A section or key left empty in YAML (only comments under it) means "the defaults".

    Parameters
    ----------
    data
        The mapping, as read from YAML.
    model
        The configuration model to validate into.
    source
        Name of where it came from, used in error messages.
    program_keys
        Top-level keys that the program fills in (e.g. the folder relative paths are resolved
        against): a user who writes one gets an error, and they are never suggested for typos.

    Returns
    -------
    ModelT
        The frozen, fully validated configuration.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with keys {', '.join(model.model_fields)}")
    added = dict(program_keys or {})
    for key in added:
        if key in data:
            raise ConfigError(f"{source}: unknown key `{key}`: the program sets it, remove the key")
    try:
        return model.model_validate({**_drop_empty(data), **added})
    except ValidationError as exc:
        messages = [_describe(err, model, set(added)) for err in exc.errors()]
        raise ConfigError(f"{source}: " + "; ".join(messages)) from None


def read_yaml(path: str | Path, what: str = "config file") -> Any:
    r"""Parse a YAML file, turning I/O and syntax errors into one-line :class:`ConfigError`\ s.

    Parameters
    ----------
    path
        The file.
    what
        How the file is named in messages ("config file", "archive config", ...).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{what} {path} is not valid YAML{where}: fix the syntax") from None


def _drop_empty(data: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping without keys left empty, at every depth: they mean "the default"."""
    return {
        key: (_drop_empty(value) if isinstance(value, Mapping) else value)
        for key, value in data.items()
        if value is not None
    }


def _describe(err: Mapping[str, Any], model: type[BaseModel], hidden: Collection[str]) -> str:
    """One pydantic error as 'key: what is wrong, what to do'."""
    loc = [
        str(part)
        for part in err["loc"]
        if not str(part).startswith(("literal[", "float", "function-"))
    ]
    key_parts, at_section, _ = _walk(loc, model)
    _, section, tag = _walk(loc[:-1], model)  # the section holding the key, for suggestions
    key = ".".join(key_parts) or "<top level>"
    kind = err["type"]
    ctx = err.get("ctx", {})
    if kind == "extra_forbidden":
        parent, name = key_parts[:-1], key_parts[-1]
        valid = [f for f in (section.model_fields if section else ()) if f not in hidden]
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
        if close:
            return f"unknown key `{key}`: did you mean `{'.'.join([*parent, close[0]])}`?"
        where = f"for `{'.'.join([*parent, 'kind'])}: {tag}`" if tag else "here"
        return f"unknown key `{key}`: valid keys {where}: {', '.join(valid)}"
    if kind == "missing":
        return f"missing key `{key}`: add it"
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        name = ctx["discriminator"].strip("'")  # the tag key, quoted by pydantic
        if kind == "union_tag_not_found":
            return f"missing key `{key}.{name}`: add it"
        tags = ctx["expected_tags"].split(", ")
        expected = f"{', '.join(tags[:-1])} or {tags[-1]}" if len(tags) > 1 else tags[0]
        return f"key `{key}.{name}`: got {ctx['tag']!r}, expected {expected}"
    got = err.get("input")
    detail = _strip(err["msg"])
    if kind == "value_error" and not detail.startswith("expected "):
        # A rule of ours: its message names the keys and the fix.
        return f"{'section' if at_section else 'key'} `{key}`: {detail}"
    expected = ctx.get("expected") or detail.removeprefix("expected ")
    return f"key `{key}`: got {got!r}, expected {expected}"


def _walk(loc: list[str], model: type[BaseModel]) -> tuple[list[str], Any, str | None]:
    """Follow a pydantic location into the models: the user's key parts, the model of the
    section it ends in (None if it is no section), and the ``kind`` of the union member taken.

    Pydantic puts the tag of a discriminated union into the location (``inputs.gf4.paths``);
    it is no key of the user's, so it is dropped. ``Model | None`` sections are entered too.
    """
    keys: list[str] = []
    section: Any = model
    tag: str | None = None
    for part in loc:
        members = _members(section)
        if part in members:  # the tag of a discriminated union
            section, tag = members[part], part
            continue
        keys.append(part)
        field = section.model_fields.get(part) if _is_model(section) else None
        section, tag = (field.annotation if field is not None else None), None
        if not _is_model(section):
            models = [a for a in typing.get_args(section) if _is_model(a)]
            section = models[0] if len(models) == 1 else section  # Optional[Model]
    return keys, (section if _is_model(section) else None), tag


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _members(annotation: Any) -> dict[str, type[BaseModel]]:
    """The models of a union of models tagged by a ``kind`` literal, by tag."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return {}
    members: dict[str, type[BaseModel]] = {}
    for member in typing.get_args(annotation):
        field = getattr(member, "model_fields", {}).get("kind")
        for value in typing.get_args(field.annotation) if field is not None else ():
            members[str(value)] = member
    return members


def _strip(msg: str) -> str:
    for prefix in ("Input should be ", "Value error, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg
