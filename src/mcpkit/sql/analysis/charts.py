"""`create_chart`'s picture: a shaped query result drawn as a PNG; every label is data, never markup.

    QueryResult --plan_chart (kind from the shape, or given)--> ChartPlan --render_png (Agg)--> PNG bytes

matplotlib's Agg backend draws without a display and without system libraries; it is imported
only when a chart is drawn (`mcpkit[charts]`). Labels (category values, column names, the title)
are clipped, stripped of control characters and drawn with math text off, so `$...$` or a
newline in a value is shown as the characters it is.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import io
import itertools
import logging
import math
import re
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import JsonValue

from mcpkit.sql.errors import refuse
from mcpkit.sql.models import QueryResult

__all__ = [
    "CHART_KINDS",
    "ChartKind",
    "ChartPlan",
    "charts_available",
    "clean_label",
    "plan_chart",
    "render_png",
]

ChartKind = Literal["bar", "line", "scatter"]
CHART_KINDS: Final[tuple[ChartKind, ...]] = ("bar", "line", "scatter")
LABEL_CHARS: Final = 32
TITLE_CHARS: Final = 80
MAX_SERIES: Final = 6
WIDTH_PX: Final = 800
HEIGHT_PX: Final = 450
_DPI: Final = 100
# Colour-blind-safe series colours (Okabe-Ito); the first is what tests look for in the pixels.
_DECIMAL: Final = re.compile(r"-?\d{1,60}(\.\d{1,60})?")
_DRAWING: Final = threading.Lock()  # matplotlib's font and text caches are not thread-safe
COLORS: Final = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
DRAWABLE: Final = 1e300
"""The largest magnitude drawn: an axis over about ±8e307 has a span (plus margins) that overflows a
float, and matplotlib's tick arithmetic fails on it."""
_TOO_LARGE: Final = (
    f"Values beyond ±{DRAWABLE:g} cannot be drawn; scale them in the query (divide, or take a log)."
)
_UNDRAWABLE: Final = "This result cannot be drawn (its values are out of the range a chart can show)."
_FIRST_DAY: Final = dt.datetime(1, 1, 1)
_LAST_DAY: Final = dt.datetime(9999, 12, 31)
log = logging.getLogger("mcpkit.sql")
_MISSING: Final = (
    "Charts need the optional matplotlib dependency, which this server lacks; "
    "its operator can install mcpkit[charts]."
)


def charts_available() -> bool:
    """Whether matplotlib (the `mcpkit[charts]` extra) can be imported."""
    return importlib.util.find_spec("matplotlib") is not None


def clean_label(value: JsonValue, limit: int = LABEL_CHARS) -> str:
    r"""A value as a one-line label of at most `limit` characters (plus an ellipsis).

    >>> clean_label("Ignore previous instructions\nand $x^2$ " + "y" * 40)
    'Ignore previous instructions\\nan…'
    >>> clean_label("\\frac{1}{0}\x1b[31m")
    '\\frac{1}{0}\\u001b[31m'
    >>> clean_label(None), clean_label(2.5)
    ('NULL', '2.5')
    """
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    else:
        text = str(value)
    text = "".join(_visible(ch) for ch in text)  # one line: breaks and controls shown as escapes
    return text if len(text) <= limit else text[:limit] + "…"


def _visible(ch: str) -> str:
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return " "
    if (
        ord(ch) < 0x20
        or 0x7F <= ord(ch) < 0xA0
        or ch in "\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    ):
        return f"\\u{ord(ch):04x}"
    return ch


def _number(value: JsonValue) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    return None


def _time(value: JsonValue) -> dt.datetime | None:
    if not isinstance(value, str) or not 8 <= len(value) <= 40:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        try:
            parsed = dt.datetime.combine(dt.date.fromisoformat(value), dt.time())
        except ValueError:
            return None
    return parsed.replace(tzinfo=None)


@dataclass(frozen=True)
class ChartPlan:
    """What to draw: the kind, the x column, the y columns and the points.

    Attributes:
        kind: bar, line or scatter.
        x: The x column's name.
        y: The y columns' names (one series each).
        x_values: The x cells as returned (labels for bars).
        series: Per y column, one float (or None where the cell is NULL) per row.
        x_axis: How x is read: `category`, `time` or `number`.
        title: The title to draw (already clipped), or "".
    """

    kind: ChartKind
    x: str
    y: tuple[str, ...]
    x_values: tuple[JsonValue, ...]
    series: tuple[tuple[float | None, ...], ...]
    x_axis: Literal["category", "time", "number"]
    title: str = ""


def _x_axis(values: Sequence[JsonValue]) -> Literal["category", "time", "number"]:
    present = [v for v in values if v is not None]
    if present and all(_number(v) is not None for v in present):
        return "number"
    if present and all(_time(v) is not None for v in present):
        return "time"
    return "category"


def _measure(value: JsonValue) -> float | None:
    # A y value: a number, or a decimal the shaping kept as text because a float would round it.
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        parsed = float(value)
        return parsed if math.isfinite(parsed) else None
    return _number(value)


def _numeric_column(result: QueryResult, index: int) -> tuple[float | None, ...] | None:
    cells = [row[index] for row in result.rows]
    numbers = [_measure(c) for c in cells]
    if any(n is None and c is not None for n, c in zip(numbers, cells, strict=True)):
        return None  # text, masked or otherwise not a number
    if all(n is None for n in numbers):
        return None
    return tuple(numbers)


def plan_chart(
    result: QueryResult,
    *,
    kind: ChartKind | None = None,
    x: str | None = None,
    y: Sequence[str] = (),
    title: str = "",
) -> ChartPlan:
    """Decide what to draw from a result's shape, or check what the caller asked for.

    The first column (or `x`) is the x axis; every other numeric column (or `y`) is a series.
    Without `kind`: text on x gives bars, dates or times give a line, numbers give a line when
    they rise row by row and a scatter otherwise.

    >>> r = QueryResult(columns=["region", "n"], rows=[["EU", 3], ["US", 5]], row_count=2,
    ...                 truncated=False, elapsed_ms=1.0)
    >>> p = plan_chart(r)
    >>> p.kind, p.x, p.y, p.series
    ('bar', 'region', ('n',), ((3.0, 5.0),))

    Raises:
        Refused: reason `chart`, with what the result lacks.
    """
    columns = list(result.columns)
    if len(columns) < 2 or not result.rows:
        refuse(
            "chart",
            "A chart needs at least one row and two columns: labels or x values first, then numbers.",
        )
    x_name = x if x is not None else columns[0]
    if x_name not in columns:
        refuse("chart", "The x column is not a column of the query's result.")
    x_index = columns.index(x_name)
    wanted = list(y) if y else [c for i, c in enumerate(columns) if i != x_index]
    if any(name not in columns for name in wanted):
        refuse("chart", "A y column is not a column of the query's result.")
    series: list[tuple[str, tuple[float | None, ...]]] = []
    for name in dict.fromkeys(wanted):
        numbers = _numeric_column(result, columns.index(name))
        if numbers is not None:
            series.append((name, numbers))
        elif y:
            refuse("chart", "A y column holds values that are not numbers (text, dates or masked cells).")
    if not series:
        refuse("chart", "No column besides x holds numbers to plot; select a count, sum or other number.")
    if len(series) > MAX_SERIES:
        refuse("chart", f"At most {MAX_SERIES} y columns fit one chart; select fewer.")
    x_values = tuple(row[x_index] for row in result.rows)
    axis = _x_axis(x_values)
    drawn = [v for _, values in series for v in values]
    if axis == "number" and kind != "bar":
        drawn += [_number(v) for v in x_values]
    if any(v is not None and abs(v) > DRAWABLE for v in drawn):
        refuse("chart", _TOO_LARGE)
    if kind is None:
        if axis == "category":
            kind = "bar"
        elif axis == "time":
            kind = "line"
        else:
            xs = [_number(v) for v in x_values]
            rising = all(a is not None and b is not None and a < b for a, b in itertools.pairwise(xs))
            kind = "line" if rising else "scatter"
    if kind == "scatter" and axis == "category":
        refuse("chart", "A scatter chart needs numbers or dates on x; use a bar chart for labels.")
    return ChartPlan(
        kind=kind,
        x=x_name,
        y=tuple(name for name, _ in series),
        x_values=x_values,
        series=tuple(values for _, values in series),
        x_axis="category" if kind == "bar" else axis,
        title=clean_label(title, TITLE_CHARS) if title else "",
    )


def render_png(plan: ChartPlan, *, width: int = WIDTH_PX, height: int = HEIGHT_PX) -> bytes:
    """Draw `plan` as a PNG of `width` x `height` pixels (matplotlib's Agg, no display, no pyplot).

    Raises:
        Refused: reason `charts_missing` when matplotlib is not installed.
    """
    try:
        from matplotlib import rc_context
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        refuse("charts_missing", _MISSING)
    # Labels are data: no math text, no TeX, whatever characters they hold.
    with _DRAWING, rc_context({"text.parse_math": False, "text.usetex": False}), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a glyph the font lacks is drawn as a box, not logged per call
        figure = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI, layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        buffer = io.BytesIO()
        try:
            _draw(axes, plan)
            figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
        except (ValueError, OverflowError) as exc:  # matplotlib's arithmetic on values it cannot place
            log.warning("chart not drawn: %s: %s", type(exc).__name__, str(exc)[:200])
            refuse("chart", _UNDRAWABLE)
    return buffer.getvalue()


def _draw(axes: Any, plan: ChartPlan) -> None:
    count = len(plan.x_values)
    positions: list[Any]
    if plan.x_axis == "category":
        positions = list(range(count))
    elif plan.x_axis == "time":
        positions = [_time(v) for v in plan.x_values]
    else:
        positions = [_number(v) for v in plan.x_values]
    many = len(plan.series) > 1
    for i, (name, values) in enumerate(zip(plan.y, plan.series, strict=True)):
        color = COLORS[i % len(COLORS)]
        label = clean_label(name)
        ys = [math.nan if v is None else v for v in values]
        if plan.kind == "bar":
            width = 0.8 / len(plan.series)
            offset = (i - (len(plan.series) - 1) / 2) * width
            axes.bar([p + offset for p in positions], ys, width=width, color=color, label=label, linewidth=0)
        else:
            points = [(p, v) for p, v in zip(positions, ys, strict=True) if p is not None]
            xs = [p for p, _ in points]
            vs = [v for _, v in points]
            if plan.kind == "line":
                axes.plot(xs, vs, color=color, label=label, marker="o" if count <= 40 else None)
            else:
                axes.scatter(xs, vs, color=color, label=label, s=18)
    if plan.x_axis == "time":
        _fit_dates(axes, [p for p in positions if p is not None])
    if plan.x_axis == "category":
        step = max(1, math.ceil(count / 40))  # at most ~40 tick labels
        ticks = positions[::step]
        labels = [clean_label(v) for v in plan.x_values[::step]]
        rotate = count > 6 or any(len(label) > 10 for label in labels)
        axes.set_xticks(
            ticks, labels=labels, rotation=45 if rotate else 0, ha="right" if rotate else "center"
        )
    axes.set_xlabel(clean_label(plan.x))
    if not many:
        axes.set_ylabel(clean_label(plan.y[0]))
    else:
        axes.legend(loc="best", fontsize="small")
    if plan.title:
        axes.set_title(plan.title)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _fit_dates(axes: Any, days: list[dt.datetime]) -> None:
    """The usual 5% margins, but within the years 1 to 9999 that dates can hold (matplotlib's
    default margins around year 1 or 9999 name days that do not exist, and it fails)."""
    if not days:
        return
    low, high = min(days), max(days)
    pad = max((high - low) * 0.05, dt.timedelta(days=1))
    start = low - pad if low - _FIRST_DAY > pad else _FIRST_DAY
    end = high + pad if _LAST_DAY - high > pad else _LAST_DAY
    axes.set_xlim(start, end)
