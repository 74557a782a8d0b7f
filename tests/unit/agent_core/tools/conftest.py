from __future__ import annotations

import pytest
from sqlalchemy.orm import sessionmaker

from agent_core.tools.base import ToolContext


@pytest.fixture
def ctx() -> ToolContext:
    return ToolContext(
        factory=sessionmaker(),
        tenant_id="default",
        bot_id=1,
        session_id="s1",
        conversation_key="default/1/webchat/c1/",
        platform="webchat",
        chat_id="c1",
        chat_type="private",
        user_id="ann",
        timezone="Europe/Berlin",
    )
