"""Drive `orch mcp serve` with the official MCP Python SDK (a client orch
did not write): list the tools, make calls, print what came back as one
JSON document.

    python_client.py CALLS_JSON -- ORCH_ARGV...

CALLS_JSON is a list of [tool, arguments]; each result is
{"tool", "is_error", "text"}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    sep = sys.argv.index("--")
    calls = json.loads(sys.argv[1])
    argv = sys.argv[sep + 1 :]
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            results = []
            for name, arguments in calls:
                r = await session.call_tool(name, arguments)
                text = "".join(getattr(c, "text", "") for c in r.content)
                results.append({"tool": name, "is_error": bool(r.is_error), "text": text})
    print(
        json.dumps(
            {
                "server": init.server_info.name,
                "tools": [{"name": t.name, "schema": t.input_schema} for t in tools.tools],
                "results": results,
            }
        )
    )


asyncio.run(main())
