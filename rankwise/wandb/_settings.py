"""``wandb.Settings``: W&B's settings model, as far as rankwise has a use for each field.

Mutable (``settings.x_primary = False`` after construction works, as in W&B), buildable
from keyword arguments or a dict, and strict: a field W&B does not have raises
``ValidationError`` (W&B's model is ``extra="forbid"``). Fields rankwise has no use for
are accepted and kept, so code written for W&B runs unchanged.

Environment (``from_env``): ``WANDB_FOO`` sets ``foo`` and ``WANDB__FOO`` sets ``x_foo``,
with W&B's special cases ``WANDB_DIR`` -> ``root_dir``, ``WANDB_NAME`` -> ``run_name``,
``WANDB_TAGS`` -> ``run_tags`` (comma-separated), ``WANDB_JOB_TYPE`` -> ``run_job_type``,
``WANDB_RUN_GROUP`` -> ``run_group``, ``WANDB_RUN_ID`` -> ``run_id``, ``WANDB_NOTES`` ->
``run_notes`` and ``WANDB_DISABLED`` (truthy) -> ``mode="disabled"``. Precedence in
``init``: its arguments, then the ``settings`` given, then the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import ValidationError

MODES = ("online", "offline", "disabled", "shared", "dryrun", "run")

# field -> default. The ones rankwise acts on come first; the rest are kept as given.
DEFAULTS: dict[str, Any] = {
    "mode": "online",
    "project": None,
    "entity": None,
    "run_name": None,
    "run_id": None,
    "run_group": None,
    "run_job_type": None,
    "run_tags": None,
    "run_notes": None,
    "root_dir": None,
    "resume": None,
    "reinit": "default",
    "silent": False,
    "quiet": False,
    "console": "auto",
    "x_label": None,
    "x_primary": True,
    "x_update_finish_state": True,
    "x_stats_gpu_device_ids": None,
    "x_disable_stats": False,
    "finish_timeout": None,
    "init_timeout": 90.0,
    "sync_tensorboard": False,
    "save_code": None,  # True: the main script (or code_dir's files) as a code artifact
    "code_dir": None,
    # accepted and kept; rankwise has no use for them
    "allow_media_symlink": True,
    "anonymous": None,
    "api_key": None,
    "base_url": "https://api.wandb.ai",
    "console_multipart": False,
    "disable_code": False,
    "disable_git": False,
    "disable_job_creation": True,
    "fork_from": None,
    "heartbeat_seconds": 30,
    "host": None,
    "http_proxy": None,
    "https_proxy": None,
    "identity_token_file": None,
    "ignore_globs": (),
    "insecure_disable_ssl": False,
    "job_name": None,
    "label_disable": False,
    "launch": False,
    "login_timeout": None,
    "notebook_name": None,
    "program": None,
    "resume_from": None,
    "show_errors": True,
    "show_info": True,
    "show_warnings": True,
    "start_method": None,
    "summary_timeout": 60,
    "table_raise_on_max_row_limit_exceeded": False,
    "username": None,
    "x_disable_machine_info": False,
    "x_disable_meta": False,
    "x_file_stream_timeout_seconds": None,
    "x_service_wait": 30.0,
    "x_stats_sampling_interval": 15.0,
}
ALIASES = {"x_primary_node": "x_primary", "_disable_stats": "x_disable_stats"}
_ENV_SPECIAL = {
    "WANDB_DIR": "root_dir",
    "WANDB_NAME": "run_name",
    "WANDB_TAGS": "run_tags",
    "WANDB_JOB_TYPE": "run_job_type",
    "WANDB_RUN_GROUP": "run_group",
    "WANDB_RUN_ID": "run_id",
    "WANDB_NOTES": "run_notes",
}
_TRUE = ("1", "true", "yes", "on")


class Settings:
    """``wandb.Settings(mode="shared", x_label="rank_0", x_primary=True, ...)``."""

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "_values", dict(DEFAULTS))
        object.__setattr__(self, "_given", set())
        for name, value in fields.items():
            setattr(self, name, value)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Settings:
        return cls(**dict(values))

    def __setattr__(self, name: str, value: Any) -> None:
        name = ALIASES.get(name, name)
        if name not in DEFAULTS:
            raise ValidationError(
                f"1 validation error for Settings\n{name}\n  Extra inputs are not permitted "
                f"(wandb.Settings has no field {name!r})"
            )
        self._values[name] = _checked(name, value)
        self._given.add(name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        name = ALIASES.get(name, name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"'Settings' object has no attribute {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def given(self) -> dict[str, Any]:
        """The fields set explicitly (in the constructor, by assignment or the env)."""
        return {k: self._values[k] for k in self._given}

    def update(self, other: Settings | Mapping[str, Any] | None = None, **kw: Any) -> None:
        """Set the fields ``other`` (a Settings: only those set there) and ``kw`` set."""
        if isinstance(other, Settings):
            items: dict[str, Any] = other.given()
        else:
            items = dict(other or {})
        items.update(kw)
        for name, value in items.items():
            setattr(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self._values.items() if k != "api_key"}

    def model_copy(self) -> Settings:
        out = Settings()
        out.update(self)
        return out

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={self._values[k]!r}" for k in sorted(self._given) if k != "api_key")
        return f"Settings({shown})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        out = cls()
        for key, raw in env.items():
            if not key.startswith("WANDB_") or raw == "":
                continue
            if key == "WANDB_DISABLED":
                if raw.strip().lower() in _TRUE:
                    out.mode = "disabled"
                continue
            if key in _ENV_SPECIAL:
                name = _ENV_SPECIAL[key]
            elif key.startswith("WANDB__"):
                name = "x_" + key[len("WANDB__") :].lower()
            else:
                name = key[len("WANDB_") :].lower()
            if name not in DEFAULTS:
                continue  # W&B reads many more variables (WANDB_API_KEY...): not settings here
            setattr(out, name, _from_text(name, raw))
        return out


def _from_text(name: str, raw: str) -> Any:
    default = DEFAULTS[name]
    if name == "run_tags":
        return tuple(t.strip() for t in raw.split(",") if t.strip())
    if name == "x_stats_gpu_device_ids":
        return [int(v) for v in raw.replace(" ", "").split(",") if v]
    if isinstance(default, bool) or name == "save_code":
        return raw.strip().lower() in _TRUE
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            return type(default)(raw)
        except ValueError:
            raise ValidationError(f"environment value {raw!r} for {name} is not a number") from None
    return raw


def _checked(name: str, value: Any) -> Any:
    if name == "mode" and value is not None and value not in MODES:
        raise ValidationError(f"Settings mode={value!r} is not one of {', '.join(MODES)}")
    if name == "x_stats_gpu_device_ids" and value is not None:
        if isinstance(value, str):
            value = [v for v in value.replace(" ", "").split(",") if v]
        try:
            value = [int(v) for v in value]
        except (TypeError, ValueError):
            raise ValidationError(
                f"x_stats_gpu_device_ids={value!r}: give a list of GPU indices"
            ) from None
    if name == "run_tags" and isinstance(value, str):
        value = (value,)
    return value
