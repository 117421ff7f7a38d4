"""The pgbus dashboard (Starlette + Jinja2), imported as pgbus.web.

from pgbus.web import create_app
app = create_app(web_auth=lambda request: ...)   # mount it under any prefix
"""

from pgbus.web.app import create_app
from pgbus.web.security import any_of, basic_auth, bearer_auth

__all__ = ["any_of", "basic_auth", "bearer_auth", "create_app"]
