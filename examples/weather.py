"""A small mcpkit server: two typed tools, strict validation, safe errors. Run: python examples/weather.py"""

from pydantic import BaseModel, ConfigDict, Field

from mcpkit import Context, Server, Tool, ToolError, tool

CITIES = {"paris": 14.5, "oslo": 3.0, "lima": 19.0}


class ForecastIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str = Field(description="City name, e.g. 'Paris'", max_length=64)
    days: int = Field(1, ge=1, le=7, description="How many days ahead (1-7)")


class Forecast(BaseModel):
    city: str = Field(description="The city, lower case")
    celsius: list[float] = Field(description="One mean temperature per day")


def forecast(args: ForecastIn, ctx: Context) -> Forecast:
    base = CITIES.get(args.city.lower())
    if base is None:
        raise ToolError(f"No forecast for that city; known cities: {', '.join(sorted(CITIES))}.")
    ctx.log.info("forecast for %s", args.city)
    return Forecast(city=args.city.lower(), celsius=[base + d * 0.5 for d in range(args.days)])


@tool()
def to_fahrenheit(celsius: float) -> str:
    """Convert a temperature from Celsius to Fahrenheit."""
    return f"{celsius * 9 / 5 + 32:.1f} F"


server = Server(
    "weather",
    version="1.0.0",
    instructions="Forecasts for a few cities. Ask for several days in one call rather than one call per day.",
    tools=[
        Tool(
            name="forecast",
            title="City forecast",
            description="Daily mean temperatures for a city.",
            input=ForecastIn,
            output=Forecast,
            handler=forecast,
            category="weather",
            cache_ttl_s=300,
        ),
        to_fahrenheit,
    ],
)

if __name__ == "__main__":
    server.run_stdio()
