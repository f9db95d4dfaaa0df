"""mcpkit: one echo tool with strict validation, masking, policy and the per-call operator record."""

import os
import sys

from pydantic import BaseModel, ConfigDict, Field

from mcpkit import Server, Tool


class EchoIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="Text to echo")


async def echo(args: EchoIn, ctx: object) -> str:
    return args.text


# MCPKIT_BENCH_TELEMETRY=api: the Telemetry middleware with no SDK installed (what an unconfigured
# server pays); =sdk: the SDK installed too, with the Prometheus reader (spans recorded, not exported).
TELEMETRY = os.environ.get("MCPKIT_BENCH_TELEMETRY", "")
middleware = []
if TELEMETRY:
    from mcpkit.telemetry import Telemetry

    if TELEMETRY == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        from mcpkit.telemetry import configure

        trace.set_tracer_provider(TracerProvider())
        configure("mcpkit-echo", prometheus=True)
    middleware.append(Telemetry())

server = Server(
    "mcpkit-echo",
    tools=[Tool(name="echo", description="Echo the text.", input=EchoIn, handler=echo)],
    middleware=middleware,
)

if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run_stdio()
    else:
        server.run_http(port=int(sys.argv[2]), json_response=sys.argv[3] == "json")
