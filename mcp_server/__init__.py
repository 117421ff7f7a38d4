"""The pgbus MCP server, imported as pgbus.mcp."""
