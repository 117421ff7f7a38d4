"""The pgbus dashboard (Starlette + Jinja2), imported as pgbus.web."""
