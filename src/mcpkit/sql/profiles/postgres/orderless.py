"""PostgreSQL: outputs whose type has no ordering operator, which an ORDER BY cannot name.

Masking pins a total order by appending the outputs' ordinals (`masking.order`); `ORDER BY 2` over
a json, xml or geometric output fails at run time ("could not identify an ordering operator for
type json"). Such an output is ordered by its text form instead, which tells apart every two values
that print differently (what the model sees). Known from the reflected type of a column output, or
from the expression: a cast to such a type, a call that builds one, a `->` extraction (json from
json; the text form is a total order for jsonb and hstore too), through the CASE guards and scalar
subqueries admission writes around a call.
"""

from __future__ import annotations

import re
from typing import Final

from sqlglot import exp

__all__ = ["orderless"]

_TYPES: Final = re.compile(
    r"\s*(json|xml|point|line|lseg|box|path|polygon|circle|jsonpath|txid_snapshot|pg_snapshot|aclitem)"
    r"\s*(\[|$)",
    re.IGNORECASE,
)
_CALLS: Final = frozenset(
    {
        *("to_json", "array_to_json", "row_to_json", "json_build_object", "json_build_array"),
        *("json_object", "json_array", "json_strip_nulls", "json_extract_path", "json_arrayagg"),
        *("json_objectagg", "xmlagg", "xmlelement", "xmlforest", "xmlconcat", "xmlcomment", "xmlpi"),
        *("xmlroot", "xmlparse", "xml", "xpath", "query_to_xml", "table_to_xml", "cursor_to_xml"),
        *("point", "line", "lseg", "box", "path", "polygon", "circle", "center", "closest_point"),
        *("bound_box", "popen", "pclose"),
    }
)
_BUILT: Final = (
    *(exp.JSONArrayAgg, exp.JSONObjectAgg, exp.JSONObject, exp.JSONArray, exp.XMLElement),
    *(exp.JSONExtract, exp.JSONBExtract),
)


def orderless(node: exp.Expr, type_text: str | None = None) -> bool:
    """Whether output `node` (declared `type_text`, when a column) may have no ordering.

    >>> import sqlglot
    >>> orderless(sqlglot.parse_one("to_json(name)", read="postgres"))
    True
    >>> orderless(sqlglot.parse_one("to_jsonb(name)", read="postgres")), orderless(exp.column("d"), "JSON")
    (False, True)
    """
    if type_text and _TYPES.match(type_text):
        return True
    value = node.unalias()
    while isinstance(value, exp.Paren):
        value = value.this
    if isinstance(value, exp.Cast):
        return bool(_TYPES.match(value.to.sql("postgres")))
    if isinstance(value, exp.Case):  # the guards admission writes: CASE WHEN ... THEN NULL ELSE <call>
        branches = [i.args.get("true") for i in value.args.get("ifs") or []] + [value.args.get("default")]
        return any(orderless(b) for b in branches if isinstance(b, exp.Expr))
    inner = value.this if isinstance(value, exp.Subquery) else None
    if isinstance(inner, exp.Select) and len(inner.selects) == 1:
        return orderless(inner.selects[0])  # a scalar subquery (admission's held operands too)
    if isinstance(value, exp.Coalesce | exp.Nullif):
        return orderless(value.this)
    if isinstance(value, _BUILT):
        return True
    return isinstance(value, exp.Anonymous) and value.name.lower() in _CALLS
