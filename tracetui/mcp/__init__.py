"""`tracetui mcp`: the MCP server (server.py) and its bounded tools (tools.py)."""
