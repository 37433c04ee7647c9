"""Spec strings: ``kind,key=value,key=value``.

One small parser serves topologies (``leafspine,racks=8,oversub=4``), traces
(``synthetic,jobs=200,load=0.8``) and anything else the command line names, so
that a notebook parameter cell and a shell flag read the same way.
Values are converted to int, float or bool where they look like one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InputError

#: a spec string longer than this is refused before it is split (they are typed or written in a grid file)
MAX_SPEC_CHARS = 4096


class SpecError(InputError):
    """A spec string or a spec file is malformed; the message says where."""


def _convert(text: str):
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


@dataclass(frozen=True)
class Spec:
    kind: str
    params: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "Spec":
        text = str(text)
        if len(text) > MAX_SPEC_CHARS:
            raise SpecError(f"spec {text[:40]!r}...: {len(text):,} characters, over the limit of {MAX_SPEC_CHARS}")
        parts = [p.strip() for p in text.split(",")]
        if not parts[0] or "=" in parts[0]:
            raise SpecError(f"spec {text!r}: must start with a kind, e.g. 'leafspine,racks=4'")
        params = {}
        for i, part in enumerate(parts[1:], start=2):
            if not part:  # 'leafspine,,racks=2' or a trailing comma: a typo, not a default
                raise SpecError(f"spec {text!r}: part {i} is empty (two commas in a row or a trailing comma); "
                                "expected kind,key=value,key=value")
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise SpecError(f"spec {text!r}: {part!r} is not key=value")
            key = key.strip()
            if key in params:
                raise SpecError(f"spec {text!r}: {key!r} given twice")
            params[key] = _convert(value.strip())
        return cls(parts[0], params)

    def __str__(self) -> str:
        return ",".join([self.kind] + [f"{k}={v}" for k, v in self.params.items()])


def check_params(where: str, given: dict, allowed: dict) -> dict:
    """Merge ``given`` over the defaults in ``allowed``; unknown keys are an error."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise SpecError(f"{where}: unknown parameter(s) {unknown}; known: {sorted(allowed)}")
    out = dict(allowed)
    out.update(given)
    return out
