"""mcpkit: one echo tool with strict validation, masking, policy and the per-call operator record."""

import sys

from pydantic import BaseModel, ConfigDict, Field

from mcpkit import Server, Tool


class EchoIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="Text to echo")


async def echo(args: EchoIn, ctx: object) -> str:
    return args.text


server = Server(
    "mcpkit-echo", tools=[Tool(name="echo", description="Echo the text.", input=EchoIn, handler=echo)]
)

if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run_stdio()
    else:
        server.run_http(port=int(sys.argv[2]), json_response=sys.argv[3] == "json")
