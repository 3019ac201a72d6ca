"""Demo-mode visitors for tests: a policy holding a signing key, and visitor tokens signed with it (what the
studio hands a new page), so handlers are called as a real visitor's page calls them."""

from __future__ import annotations

import secrets

from studio.demo.identity import mint_token
from studio.demo.policy import DemoPolicy

KEY = secrets.token_bytes(32)
DEMO = DemoPolicy(enabled=True, key=KEY)


def new_visitor() -> str:
    """A token the demo policy above accepts, as the server mints one."""
    return mint_token(KEY)


ALICE, BOB, CAROL = new_visitor(), new_visitor(), new_visitor()
