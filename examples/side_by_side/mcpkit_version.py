"""The side-by-side server (docs/fastmcp.md), in mcpkit."""

import os
from typing import Annotated

from pydantic import Field

from mcpkit import Server, ToolError, tool

CITIES = {"paris": 14.5, "oslo": 3.0}


@tool
def forecast(
    city: Annotated[str, Field(max_length=64, description="City name, e.g. 'Paris'")],
    days: Annotated[int, Field(ge=1, le=7, description="Days ahead, 1-7")] = 1,
    unit: str | None = None,
) -> str:
    """Forecast the mean temperature for the next days."""
    base = CITIES.get(city.lower())
    if base is None:
        raise ToolError("No forecast for that city; try Paris or Oslo.")
    return f"{city}: {[base + d / 2 for d in range(days)]} {unit or 'C'}"


@tool(secrets=["WEATHER_TOKEN"])
def diagnose(verbose: bool = False) -> str:
    """Report the upstream connection state."""
    if verbose:
        raise RuntimeError(f"connect failed with token {os.environ.get('WEATHER_TOKEN')}")
    return f"using token {os.environ.get('WEATHER_TOKEN')}"


server = Server("weather", tools=[forecast, diagnose], rate_limit_per_min=60)
