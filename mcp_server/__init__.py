"""The pgbus MCP server, imported as pgbus.mcp.

build_server() gives an MCPServer (the official SDK); `pgbus mcp` serves it over stdio, and
`pgbus mcp --http` or asgi_app() over streamable HTTP."""

from pgbus.mcp.server import build_server
from pgbus.mcp.transports import McpApp, asgi_app

__all__ = ["McpApp", "asgi_app", "build_server"]
