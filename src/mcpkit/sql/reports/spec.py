"""`reports.yaml` as data: each report's name, texts, typed parameters, SQL, limits and output columns.

Structure only: everything here is checked without a database. Every problem is collected with its
file and line, and the load fails with all of them (`ReportsError`), never with half the reports.
"""

from __future__ import annotations

import datetime as dt
import keyword
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import yaml
from pydantic import BaseModel

from mcpkit.definition import NAME_PATTERN
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.reports.like import LIKE_MODES
from mcpkit.sql.reports.pattern import full_match, pattern_problem
from mcpkit.sql.reports.yaml_lines import Located, Path, load_located

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "PARAM_TYPES",
    "ParamSpec",
    "Problems",
    "ReportSpec",
    "ReportsError",
    "parse_reports",
]

PARAM_TYPES: Final = ("integer", "number", "string", "boolean", "date")
INT_MIN: Final = -(2**63)
"""The smallest `integer` a report binds (signed 64-bit on every engine; SQLite binds nothing wider)."""
INT_MAX: Final = 2**63 - 1
"""The largest `integer` a report binds."""
_REPORT_KEYS: Final = frozenset(
    {"name", "title", "description", "parameters", "sql", "max_rows", "cache_ttl_s", "output"}
)
_PARAM_KEYS: Final = frozenset(
    {
        "type",
        "description",
        "enum",
        "minimum",
        "maximum",
        "pattern",
        "default",
        "required",
        "max_length",
        "like",
        "secret",
    }
)
_PARAM_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_RESERVED: Final = frozenset(dir(BaseModel)) | frozenset(keyword.kwlist)


class ReportsError(SqlConfigError):
    """A reports file that cannot be served; `problems` lists each as `file:line: report 'x': what`."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ParamSpec:
    """One typed parameter, bound as `:name` in the report's SQL."""

    name: str
    type: str
    description: str = ""
    enum: tuple[Any, ...] | None = None
    minimum: Any = None
    maximum: Any = None
    pattern: str | None = None
    max_length: int | None = None
    default: Any = None
    required: bool = True
    like: str | None = None
    secret: bool = False
    line: int = 0


@dataclass(frozen=True)
class ReportSpec:
    """One report: a reviewed question served as its own tool."""

    name: str
    title: str
    description: str
    params: tuple[ParamSpec, ...]
    sql: str
    max_rows: int | None = None
    cache_ttl_s: float | None = None
    output: tuple[tuple[str, str], ...] = ()
    line: int = 0
    sql_line: int = 0
    broken: bool = False  # its structure has problems: the SQL is not checked further


class Problems:
    """Collects problems with file, line and report name."""

    def __init__(self, source: str, doc: Located) -> None:
        self.source, self.doc = source, doc
        self.items: list[str] = []

    def add(self, path: Path, message: str, report: str | None = None) -> None:
        """Record one problem at `path` in the document."""
        who = f"report {report!r}: " if report else ""
        self.items.append(f"{self.source}:{self.doc.line(path)}: {who}{message}")

    def raise_if_any(self) -> None:
        """Raise `ReportsError` with every problem found so far, in file order."""
        if self.items:
            raise ReportsError(sorted(self.items, key=self._line))

    def _line(self, item: str) -> int:
        number = item[len(self.source) + 1 :].split(":", 1)[0]
        return int(number) if number.isdigit() else 0


def _typed(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return True
    try:
        dt.date.fromisoformat(str(value))
    except ValueError:
        return False
    return isinstance(value, str)


def _as_date(value: Any) -> Any:
    return dt.date.fromisoformat(value) if isinstance(value, str) else value


def _param(name: str, raw: Any, at: Path, p: Problems, report: str) -> ParamSpec | None:
    if not _PARAM_NAME.fullmatch(name) or name in _RESERVED:
        p.add(
            at,
            f"parameter {name!r}: names are lower-case letters, digits and _ (not a reserved word)",
            report,
        )
        return None
    if not isinstance(raw, Mapping):
        p.add(at, f"parameter {name!r}: give its type and limits as a mapping", report)
        return None
    for key in sorted(set(raw) - _PARAM_KEYS):
        p.add((*at, key), f"parameter {name!r}: unknown key {key!r}", report)
    kind = raw.get("type")
    if kind not in PARAM_TYPES:
        p.add((*at, "type"), f"parameter {name!r}: type must be one of {', '.join(PARAM_TYPES)}", report)
        return None
    for key in ("enum", "minimum", "maximum", "default") if kind in ("integer", "number") else ():
        given = raw.get(key)
        values: list[Any] = given if isinstance(given, list) else [given]
        if kind == "integer" and any(_typed(kind, v) and not INT_MIN <= v <= INT_MAX for v in values):
            p.add(
                (*at, key),
                f"parameter {name!r}: integers are 64-bit, so {key} must lie between {INT_MIN} and {INT_MAX}",
                report,
            )
        if kind == "number" and any(_typed(kind, v) and not math.isfinite(v) for v in values):
            p.add(
                (*at, key), f"parameter {name!r}: {key} must be a finite number, not NaN or infinity", report
            )
    enum = raw.get("enum")
    if enum is not None and (
        not isinstance(enum, list) or not enum or not all(_typed(kind, v) for v in enum)
    ):
        p.add((*at, "enum"), f"parameter {name!r}: enum is a non-empty list of {kind} values", report)
        enum = None
    lo, hi = raw.get("minimum"), raw.get("maximum")
    for key, bound in (("minimum", lo), ("maximum", hi)):
        if bound is not None and (kind not in ("integer", "number", "date") or not _typed(kind, bound)):
            p.add((*at, key), f"parameter {name!r}: {key} needs an integer, number or date parameter", report)
    if kind == "date":
        lo, hi = _as_date(lo), _as_date(hi)
    if lo is not None and hi is not None and _typed(kind, lo) and _typed(kind, hi) and lo > hi:
        p.add((*at, "minimum"), f"parameter {name!r}: minimum is above maximum", report)
    pattern = raw.get("pattern")
    if pattern is not None:
        why = (
            "pattern needs a string parameter"
            if kind != "string" or not isinstance(pattern, str)
            else pattern_problem(pattern)
        )
        if why:
            p.add((*at, "pattern"), f"parameter {name!r}: bad pattern ({why})", report)
            pattern = None
    like = raw.get("like")
    if like is not None and (kind != "string" or like not in LIKE_MODES):
        p.add(
            (*at, "like"),
            f"parameter {name!r}: like is one of {', '.join(LIKE_MODES)} (string parameters)",
            report,
        )
        like = None
    secret = raw.get("secret", False)
    if not isinstance(secret, bool):
        p.add((*at, "secret"), f"parameter {name!r}: secret is true or false", report)
        secret = False
    max_length = raw.get("max_length", 200 if kind == "string" and not enum else None)
    if max_length is not None and (kind != "string" or not isinstance(max_length, int) or max_length < 1):
        p.add((*at, "max_length"), f"parameter {name!r}: max_length is a positive integer (strings)", report)
    required = raw.get("required", "default" not in raw)
    if not isinstance(required, bool):
        p.add((*at, "required"), f"parameter {name!r}: required is true or false", report)
        required = True
    default = raw.get("default")
    if default is not None:
        problem = None
        if not _typed(kind, default):
            problem = f"default must be a {kind}"
        elif enum is not None and default not in enum:
            problem = "default is not one of the enum values"
        elif kind == "date":
            default = _as_date(default)
        if problem is None and lo is not None and _typed(kind, lo) and default < lo:
            problem = "default is below minimum"
        if problem is None and hi is not None and _typed(kind, hi) and default > hi:
            problem = "default is above maximum"
        if problem is None and pattern and not full_match(pattern, str(default)):
            problem = "default does not match pattern"
        if (
            problem is None
            and kind == "string"
            and not enum
            and isinstance(max_length, int)
            and len(default) > max_length
        ):
            problem = f"default is longer than max_length ({len(default)} > {max_length} characters)"
        if problem:
            p.add((*at, "default"), f"parameter {name!r}: {problem}", report)
    if required and "default" in raw:
        p.add((*at, "required"), f"parameter {name!r}: a parameter with a default is not required", report)
    return ParamSpec(
        name=name,
        type=kind,
        description=str(raw.get("description") or ""),
        enum=tuple(enum) if enum else None,
        minimum=lo,
        maximum=hi,
        pattern=pattern,
        max_length=max_length if isinstance(max_length, int) else None,
        default=default,
        required=required,
        like=like,
        secret=secret,
        line=p.doc.line(at),
    )


def _text(raw: Mapping[str, Any], key: str, at: Path, p: Problems, report: str, need: bool = True) -> str:
    value = raw.get(key)
    if value is None and not need:
        return ""
    if not isinstance(value, str) or not value.strip():
        p.add((*at, key), f"{key} is required text", report)
        return ""
    return value.strip()


def _positive(raw: Mapping[str, Any], key: str, at: Path, p: Problems, report: str) -> Any:
    value = raw.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
        p.add((*at, key), f"{key} must be a positive number", report)
        return None
    if key == "max_rows" and value is not None and not isinstance(value, int):
        p.add((*at, key), "max_rows must be an integer", report)
        return None
    return value


def _report(raw: Any, at: Path, p: Problems) -> ReportSpec | None:
    if not isinstance(raw, Mapping):
        p.add(at, "each report is a mapping with name, description, sql, ...")
        return None
    before = len(p.items)
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        p.add((*at, "name"), "name is required: 1-128 letters, digits, '_', '-' or '.'")
        return None
    for key in sorted(set(raw) - _REPORT_KEYS):
        p.add((*at, key), f"unknown key {key!r}", name)
    params_raw = raw.get("parameters") or {}
    params: list[ParamSpec] = []
    if not isinstance(params_raw, Mapping):
        p.add((*at, "parameters"), "parameters is a mapping of name -> {type, ...}", name)
    else:
        for pname, praw in params_raw.items():
            param = _param(str(pname), praw, (*at, "parameters", pname), p, name)
            if param is not None:
                params.append(param)
    output_raw = raw.get("output") or {}
    if not isinstance(output_raw, Mapping) or not all(isinstance(v, str) for v in output_raw.values()):
        p.add((*at, "output"), "output is a mapping of column name -> description", name)
        output_raw = {}
    spec = ReportSpec(
        name=name,
        title=_text(raw, "title", at, p, name, need=False) or name.replace("_", " ").capitalize(),
        description=_text(raw, "description", at, p, name),
        params=tuple(params),
        sql=_text(raw, "sql", at, p, name),
        max_rows=_positive(raw, "max_rows", at, p, name),
        cache_ttl_s=_positive(raw, "cache_ttl_s", at, p, name),
        output=tuple((str(k), v) for k, v in output_raw.items()),
        line=p.doc.line(at),
        sql_line=p.doc.line((*at, "sql")),
    )
    return replace(spec, broken=len(p.items) > before)


def parse_reports(text: str, source: str = "reports.yaml") -> tuple[list[ReportSpec], Problems]:
    """Read a reports file's structure; the caller adds database checks to the same `Problems`.

    >>> specs, problems = parse_reports("reports:\\n  - name: n\\n    description: d\\n    sql: SELECT 1\\n")
    >>> [s.name for s in specs], problems.items
    (['n'], [])

    Raises:
        ReportsError: the text is not YAML or has no `reports:` list.
    """
    try:
        doc = load_located(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ReportsError([f"{source}{where}: not valid YAML ({getattr(exc, 'problem', exc)})"]) from None
    p = Problems(source, doc)
    for path, line in doc.duplicates:
        p.items.append(f"{source}:{line}: key {path[-1]!r} is given twice")
    root = doc.data
    if not isinstance(root, Mapping) or not isinstance(root.get("reports"), list):
        raise ReportsError([f"{source}:1: the file needs a top-level `reports:` list"])
    for key in sorted(set(root) - {"reports", "version"}):
        p.add((key,), f"unknown top-level key {key!r}")
    specs: list[ReportSpec] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(root["reports"]):
        spec = _report(raw, ("reports", i), p)
        if spec is None:
            continue
        if spec.name.casefold() in seen:
            p.add(
                ("reports", i, "name"),
                f"the name is also used on line {seen[spec.name.casefold()]}",
                spec.name,
            )
            continue
        seen[spec.name.casefold()] = spec.line
        specs.append(spec)
    return specs, p
